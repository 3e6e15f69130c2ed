"""The composer's `#` menu (#48): a user's own collections, those shared with them (with
everyone, or with a group they are in) and their ready files; never another user's, nor a
group's they are not in, nor a file still being read."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from chatapp.knowledge.models import Collection, KnowledgeFile

pytestmark = [pytest.mark.django_db]


def add_file(collection: Collection, name: str, state: str) -> KnowledgeFile:
    return KnowledgeFile.objects.create(
        collection=collection,
        name=name,
        content_type="text/markdown",
        size=1,
        sha256="0" * 64,
        data=b"x",
        state=state,
    )


def test_the_menu_lists_what_the_user_may_use(alice: Any, bob: Any) -> None:
    team, others = Group.objects.create(name="team"), Group.objects.create(name="others")
    alice.groups.add(team)
    handbook = Collection.objects.create(owner=alice, name="Handbook")
    add_file(handbook, "Leave.md", KnowledgeFile.State.READY)
    add_file(handbook, "Draft.md", KnowledgeFile.State.EMBEDDING)
    Collection.objects.create(name="Everyone's")
    Collection.objects.create(name="Team's").groups.add(team)
    Collection.objects.create(name="Others'").groups.add(others)
    add_file(Collection.objects.create(owner=bob, name="Bob's"), "Bob.md", "ready")
    client = Client()
    client.force_login(alice)

    response = client.get(reverse("chat:knowledge_menu"))

    assert response.status_code == 200
    assert [(e["kind"], e["name"], e["detail"]) for e in response.json()["entries"]] == [
        ("collection", "Everyone's", "collection, 0 files ready"),
        ("collection", "Handbook", "collection, 1 file ready"),
        ("collection", "Team's", "collection, 0 files ready"),
        ("file", "Leave.md", "in Handbook"),
    ]


def test_the_menu_needs_a_signed_in_user() -> None:
    response = Client().get(reverse("chat:knowledge_menu"))
    assert response.status_code == 302
