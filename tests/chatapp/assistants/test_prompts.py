"""Saved prompts (#41): their `{{variables}}`, which ones a user's `/` menu offers (their own
first, then those shared with them), the page data the menu reads, and the Settings pages."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import AsyncClient, Client
from django.urls import reverse

from chatapp.assistants.models import Prompt
from chatapp.assistants.prompt_text import MAX_VARIABLES, fill, variables
from chatapp.views.prompts import menu_entries

pytestmark = [pytest.mark.django_db]


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_variables_are_asked_for_once_each_in_order_of_first_use() -> None:
    text = "Translate {{ text }} into {{language}}, then {{text}} again. {{not a var!}} {{}}"
    assert variables(text) == ("text", "language")
    assert fill(text, {"text": "bonjour", "language": "English"}) == (
        "Translate bonjour into English, then bonjour again. {{not a var!}} {{}}"
    )


def test_a_value_is_inserted_as_written_and_unfilled_ones_stay() -> None:
    assert fill("{{a}} and {{b}}", {"a": "{{b}} $1 \\1"}) == "{{b}} $1 \\1 and {{b}}"


def test_at_most_ten_variables_are_asked_for() -> None:
    text = " ".join(f"{{{{v{n}}}}}" for n in range(15))
    assert len(variables(text)) == MAX_VARIABLES


def test_the_menu_offers_a_users_own_before_a_shared_one_of_the_same_name(
    alice: Any, bob: Any
) -> None:
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    Prompt.objects.create(name="summarize", text="Mine: {{text}}", owner=alice)
    Prompt.objects.create(name="summarize", text="Shared")
    Prompt.objects.create(name="standup", text="Team only").groups.add(team)
    Prompt.objects.create(name="bobs", text="Bob's", owner=bob)
    entries = menu_entries(alice)
    assert [(e.name, e.text, e.variables, e.shared) for e in entries] == [
        ("standup", "Team only", (), True),
        ("summarize", "Mine: {{text}}", ("text",), False),
    ]
    assert [e.text for e in menu_entries(bob)] == ["Bob's", "Shared"]


@pytest.mark.django_db(transaction=True)
async def test_the_chat_page_carries_the_menu_as_inert_json(alice: Any) -> None:
    text = "</script><script>alert(1)</script> {{x}}"
    await Prompt.objects.acreate(name="evil", text=text, owner=alice)
    client = AsyncClient()
    await client.aforce_login(alice)
    html = (await client.get(reverse("chat:home"))).text
    found = re.search(
        r'<script id="prompt-menu-data" type="application/json">(.*?)</script>', html, re.S
    )
    assert found, "the data block"
    assert "<script>alert" not in found.group(1), "escaped by json_script"
    assert json.loads(found.group(1)) == [
        {
            "name": "evil",
            "text": "</script><script>alert(1)</script> {{x}}",
            "variables": ["x"],
            "shared": False,
        }
    ]
    assert 'aria-controls="prompt-menu"' in html


def test_a_user_adds_changes_and_deletes_their_own(alice: Any) -> None:
    client = client_of(alice)
    response = client.post(
        reverse("chat:new_prompt"), {"name": "Translate", "text": "Into {{language}}: {{text}}"}
    )
    assert response.status_code == 302
    row = Prompt.objects.get(owner=alice)
    assert (row.name, row.text) == ("translate", "Into {{language}}: {{text}}")
    listing = client.get(reverse("chat:prompts")).content.decode()
    assert "/translate" in listing

    taken = client.post(reverse("chat:new_prompt"), {"name": "translate", "text": "Again"})
    assert "You have a prompt named /translate already." in taken.content.decode()
    bad = client.post(reverse("chat:new_prompt"), {"name": "two words", "text": "x"})
    assert "A name is letters, digits, - and _ only" in bad.content.decode()

    response = client.post(
        reverse("chat:edit_prompt", args=[row.pk]), {"name": "translate", "text": "New"}
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.text == "New"
    assert client.post(reverse("chat:delete_prompt", args=[row.pk])).status_code == 302
    assert not Prompt.objects.exists()


def test_no_one_changes_another_users_or_a_shared_one(alice: Any, bob: Any) -> None:
    bobs = Prompt.objects.create(name="mine", text="Bob's", owner=bob)
    shared = Prompt.objects.create(name="shared", text="For all")
    client = client_of(alice)
    for row in (bobs, shared):
        assert client.get(reverse("chat:edit_prompt", args=[row.pk])).status_code == 404
        assert client.post(reverse("chat:delete_prompt", args=[row.pk])).status_code == 404
    listing = client.get(reverse("chat:prompts")).content.decode()
    assert "/shared" in listing
    assert "/mine" not in listing


def test_the_menu_carries_a_bounded_number_of_characters(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatapp.views import prompts

    monkeypatch.setattr(prompts, "MENU_CHARS", 25)
    Prompt.objects.create(name="a-long", text="x" * 20, owner=alice)
    Prompt.objects.create(name="b-longer", text="y" * 20, owner=alice)
    Prompt.objects.create(name="c-short", text="z" * 5, owner=alice)
    assert [e.name for e in menu_entries(alice)] == ["a-long", "c-short"]
