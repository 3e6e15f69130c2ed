"""The knowledge pages through Django's test client: a user sees their own collections and those
shared with them, any other is a 404 on every route; making a collection, adding files (queued
with their task), the files' list polling itself only while a file is busy, removing and
re-indexing; staff change a shared collection's files, its other users only read them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from chatapp.knowledge.limits import MAX_FILE_BYTES
from chatapp.knowledge.models import Collection, KnowledgeFile
from tests.pdf_bytes import pdf_bytes

pytestmark = pytest.mark.django_db
State = KnowledgeFile.State
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_list_shows_own_and_shared_collections_only(
    alice: Any, bob: Any, handbook: Collection
) -> None:
    group = Group.objects.create(name="staff")
    shared = Collection.objects.create(name="Company policies")
    shared.groups.add(group)
    Collection.objects.create(name="For everyone")
    Collection.objects.create(owner=bob, name="Bob's notes")

    page = client_of(alice).get(reverse("chat:knowledge")).content.decode()
    assert "Handbook" in page
    assert "For everyone" in page
    assert "Company policies" not in page
    assert "Bob's notes" not in page
    alice.groups.add(group)
    assert "Company policies" in client_of(alice).get(reverse("chat:knowledge")).content.decode()


def test_making_a_collection_and_adding_files(alice: Any) -> None:
    client = client_of(alice)
    response = client.post(
        reverse("chat:new_collection"), {"name": " Handbook ", "description": "Rules"}
    )
    row = Collection.objects.get()
    assert (row.owner, row.name, row.description) == (alice, "Handbook", "Rules")
    assert response["Location"] == reverse("chat:collection", args=[row.pk])

    files = [
        SimpleUploadedFile("rules.md", b"# Leave\n\nThirty days."),
        SimpleUploadedFile("guide.pdf", pdf_bytes("Badges open doors")),
    ]
    response = client.post(reverse("chat:collection_files", args=[row.pk]), {"files": files})
    assert response.status_code == 302
    assert sorted(KnowledgeFile.objects.values_list("name", "state")) == [
        ("guide.pdf", State.QUEUED),
        ("rules.md", State.QUEUED),
    ]
    assert DBTaskResult.objects.count() == 2
    page = client.get(reverse("chat:collection", args=[row.pk])).content.decode()
    assert page.count("Queued") == 2
    assert 'hx-trigger="every 1s"' in page  # busy: the list polls itself


def test_a_refused_file_is_named_and_the_others_added(alice: Any, handbook: Collection) -> None:
    files = [
        SimpleUploadedFile("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00"),
        SimpleUploadedFile("rules.md", b"# Leave"),
    ]
    response = client_of(alice).post(
        reverse("chat:collection_files", args=[handbook.pk]), {"files": files}, **HTMX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "photo.png was not added: it is not a PDF, DOCX, HTML, Markdown or text file" in html
    assert list(KnowledgeFile.objects.values_list("name", flat=True)) == ["rules.md"]


def test_one_file_too_large_is_named_not_called_files_together(
    alice: Any, handbook: Collection
) -> None:
    big = SimpleUploadedFile("Big.pdf", b"%PDF-1.4\n" + b"0" * (MAX_FILE_BYTES + 1))
    response = client_of(alice).post(
        reverse("chat:collection_files", args=[handbook.pk]), {"files": [big]}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert f"Big.pdf is larger than {MAX_FILE_BYTES // 2**20} MB." in html
    assert "Together these files" not in html
    assert not KnowledgeFile.objects.exists()


def test_the_files_list_stops_polling_once_none_is_busy(
    alice: Any, handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    file = added(handbook, "rules.md", "# Leave\n\nThirty days.")
    KnowledgeFile.objects.filter(pk=file.pk).update(state=State.EMBEDDING, done=3, total=8)
    url = reverse("chat:collection_files", args=[handbook.pk])
    html = client_of(alice).get(url, **HTMX).content.decode()
    assert "Embedding 3 of 8 passages" in html
    assert '<progress max="8" value="3"' in html
    assert 'hx-trigger="every 1s"' in html
    KnowledgeFile.objects.filter(pk=file.pk).update(state=State.FAILED, error="it is encrypted")
    html = client_of(alice).get(url, **HTMX).content.decode()
    assert "Failed: it is encrypted" in html
    KnowledgeFile.objects.filter(pk=file.pk).update(state=State.EMBEDDING, done=0, total=1)
    assert "Embedding 0 of 1 passage…" in client_of(alice).get(url, **HTMX).content.decode()
    assert "hx-trigger" not in html


def test_removing_and_reindexing_a_file(
    alice: Any, handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    file = added(handbook, "rules.md", "# Leave")
    KnowledgeFile.objects.filter(pk=file.pk).update(state=State.READY)
    client = client_of(alice)
    client.post(reverse("chat:reindex_knowledge_file", args=[handbook.pk, file.pk]), **HTMX)
    assert KnowledgeFile.objects.get().state == State.QUEUED
    html = client.post(reverse("chat:remove_knowledge_file", args=[handbook.pk, file.pk]), **HTMX)
    assert "Removed rules.md." in html.content.decode()
    assert not KnowledgeFile.objects.exists()


def test_another_users_collection_is_a_404_on_every_route(
    bob: Any, handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    file = added(handbook, "rules.md", "# Leave")
    client = client_of(bob)
    pk = handbook.pk
    for method, name, args in [
        ("get", "chat:collection", [pk]),
        ("get", "chat:collection_files", [pk]),
        ("post", "chat:collection_files", [pk]),
        ("post", "chat:remove_knowledge_file", [pk, file.pk]),
        ("post", "chat:reindex_knowledge_file", [pk, file.pk]),
        ("post", "chat:delete_collection", [pk]),
    ]:
        response = getattr(client, method)(reverse(name, args=args))
        assert response.status_code == 404, (method, name)
    assert KnowledgeFile.objects.filter(pk=file.pk).exists()
    assert Collection.objects.filter(pk=pk).exists()


def test_staff_change_a_shared_collections_files_and_its_users_only_read_them(
    alice: Any, bob: Any
) -> None:
    shared = Collection.objects.create(name="Company policies")
    bob.is_staff = True
    bob.save()
    url = reverse("chat:collection_files", args=[shared.pk])
    upload = {"files": [SimpleUploadedFile("rules.md", b"# Leave")]}
    assert client_of(alice).post(url, upload).status_code == 404
    page = client_of(alice).get(reverse("chat:collection", args=[shared.pk])).content.decode()
    assert "Add files" not in page
    assert (
        client_of(bob)
        .post(url, {"files": [SimpleUploadedFile("rules.md", b"# Leave")]})
        .status_code
        == 302
    )
    assert KnowledgeFile.objects.get().added_by == bob
    # Deleting a shared collection is the admin's, in the Django admin.
    assert (
        client_of(bob).post(reverse("chat:delete_collection", args=[shared.pk])).status_code == 404
    )


def test_deleting_a_collection(
    alice: Any, handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    added(handbook, "rules.md", "# Leave")
    response = client_of(alice).post(reverse("chat:delete_collection", args=[handbook.pk]))
    assert response["Location"] == reverse("chat:knowledge")
    assert not Collection.objects.exists()
    assert not KnowledgeFile.objects.exists()


def test_the_admin_shares_collections_and_lists_their_files(
    admin_client: Client, handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    added(handbook, "rules.md", "# Leave")
    listed = admin_client.get(reverse("admin:chatapp_collection_changelist")).content.decode()
    assert "Handbook" in listed
    assert "own (alice)" in listed
    page = admin_client.get(reverse("admin:chatapp_collection_change", args=[handbook.pk]))
    html = page.content.decode()
    assert "rules.md" in html
    assert reverse("chat:collection", args=[handbook.pk]) in html
