"""Importing ChatGPT's conversations.json and Open WebUI's export: the message tree with its
branches and the branch it showed, marked as imported, no generation or cost; and the files
refused, each with its reason."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils.html import escape

from chatapp.conversations import importing
from chatapp.conversations.tree import MessageTree
from chatapp.conversations.turns import IMPORTED_CONTINUE, IMPORTED_RETRY
from chatapp.models import Conversation, Generation, Message
from chatapp.streaming import worker

FIXTURES = Path(__file__).parent.parent / "fixtures" / "imports"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload(client: Client, content: bytes, name: str = "conversations.json") -> Any:
    file = SimpleUploadedFile(name, content, content_type="application/json")
    return client.post(reverse("chat:import"), {"file": file})


def shown_branch(conversation: Conversation) -> list[tuple[str, str]]:
    tree = MessageTree(conversation.pk)
    path = tree.path(tree.shown_leaf(conversation.current_leaf_id))
    by_pk = {m.pk: m for m in conversation.messages.all()}
    return [(by_pk[pk].role, by_pk[pk].content) for pk in path]


@pytest.mark.django_db
def test_a_chatgpt_export_comes_in_with_its_branches_and_the_branch_it_showed(alice: Any) -> None:
    response = upload(client_for(alice), (FIXTURES / "chatgpt_conversations.json").read_bytes())
    assert response.status_code == 200
    assert "Imported 2 conversations (9 messages)" in response.content.decode()
    bread = Conversation.objects.get(title="Sourdough starter schedule")
    assert bread.imported_from == "chatgpt"
    assert bread.user == alice
    # The system prompt, hidden context and the browsing round trip are left out; the answer
    # after the tool hangs from the question that asked it.
    assert shown_branch(bread) == [
        ("user", "How often should I feed a rye starter kept at 24 °C?"),
        ("assistant", bread.messages.get(content__startswith="At 24").content),
        (
            "user",
            "[An image was attached here; images are not imported.]\n\n"
            "Here is my starter this morning: is it ready to bake with?",
        ),
        ("assistant", "It has doubled and is domed: yes, bake with it within the hour."),
    ]
    # The edited question is the other version of the second question.
    first_answer = bread.messages.get(content__startswith="At 24")
    assert list(first_answer.children.order_by("pk").values_list("content", flat=True)) == [
        "And in the fridge?",
        "[An image was attached here; images are not imported.]\n\n"
        "Here is my starter this morning: is it ready to bake with?",
    ]
    assert bread.messages.count() == 6
    assert bread.created_at.timestamp() == pytest.approx(1731400000.123456)
    assert bread.updated_at.timestamp() == pytest.approx(1731403600.5)
    question = bread.messages.get(content__startswith="How often")
    assert question.created_at.timestamp() == pytest.approx(1731400010.0)
    # Two answers to one question: regenerated, the second shown.
    regex = Conversation.objects.get(title="Regex for ISO dates")
    assert shown_branch(regex)[-1][1].startswith("Use `^\\d{4}")
    assert regex.messages.filter(role="assistant").count() == 2
    # Nothing was asked of a gateway here.
    assert not Generation.objects.exists()


@pytest.mark.django_db
def test_an_open_webui_export_comes_in_from_its_history_or_its_flat_messages(alice: Any) -> None:
    response = upload(client_for(alice), (FIXTURES / "open_webui_export.json").read_bytes())
    assert response.status_code == 200
    lisbon = Conversation.objects.get(title="Packing list for Lisbon")
    assert lisbon.imported_from == "open_webui"
    assert [content for _, content in shown_branch(lisbon)] == [
        "What should I pack for four days in Lisbon in March?",
        lisbon.messages.get(content__startswith="March in Lisbon").content,
        "And an umbrella?",
        "A small one: the wind off the Tagus turns big ones inside out.",
    ]
    question = lisbon.messages.get(parent=None)
    assert question.children.count() == 2  # the two models' answers: versions of one another
    assert lisbon.updated_at.timestamp() == 1741600130
    flat = Conversation.objects.get(title="Old flat chat")
    assert shown_branch(flat) == [
        ("user", "Translate 'good morning' to Portuguese."),
        ("assistant", "Bom dia."),
    ]
    assert not Generation.objects.exists()


@pytest.mark.django_db
def test_an_imported_conversation_is_marked_in_the_sidebar_and_on_its_page(alice: Any) -> None:
    client = client_for(alice)
    upload(client, (FIXTURES / "open_webui_export.json").read_bytes())
    lisbon = Conversation.objects.get(title="Packing list for Lisbon")
    home = client.get(reverse("chat:home")).content.decode()
    assert 'title="Imported from Open WebUI">imported</span>' in home
    page = client.get(reverse("chat:conversation", args=[lisbon.pk])).content.decode()
    assert "Imported from Open WebUI" in page
    assert "wind off the Tagus" in page
    assert "calçada" in page


@pytest.mark.django_db
def test_the_import_is_only_the_importers(alice: Any, bob: Any) -> None:
    upload(client_for(alice), (FIXTURES / "chatgpt_conversations.json").read_bytes())
    bob_client = client_for(bob)
    assert "Sourdough" not in bob_client.get(reverse("chat:home")).content.decode()
    bread = Conversation.objects.get(title="Sourdough starter schedule")
    assert bob_client.get(reverse("chat:conversation", args=[bread.pk])).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfe not json", "This is not a JSON file"),
        (b'{"title": "no messages"}', "in no format this app reads"),
        (b"[1, 2, 3]", "This JSON is not a list of conversations"),
        (b'"a string"', "This JSON is not a list of conversations"),
        (b"[]", "no conversation with messages"),
        (b'[{"mapping": "not a map"}]', "Conversation 1 could not be read"),
        (b"[" * 5000 + b"]" * 5000, "This is not a JSON file"),  # nested past orjson's limit
    ],
)
def test_a_bad_file_is_refused_with_its_reason_and_nothing_is_imported(
    alice: Any, content: bytes, reason: str
) -> None:
    response = upload(client_for(alice), content)
    assert response.status_code == 400
    assert reason in response.content.decode()
    assert not Conversation.objects.exists()


@pytest.mark.django_db
def test_no_file_and_too_many_conversations_are_refused(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(alice)
    response = client.post(reverse("chat:import"), {})
    assert response.status_code == 400
    assert "Choose a file to import." in response.content.decode()
    monkeypatch.setattr(importing, "MAX_CONVERSATIONS", 1)
    response = upload(client, (FIXTURES / "open_webui_export.json").read_bytes())
    assert "at most 1 are imported at once" in response.content.decode()
    monkeypatch.setattr(importing, "MAX_CONVERSATIONS", 10)
    monkeypatch.setattr(importing, "MAX_MESSAGES", 3)
    response = upload(client, (FIXTURES / "open_webui_export.json").read_bytes())
    assert "over 3 messages" in response.content.decode()
    assert not Conversation.objects.exists()


@pytest.mark.django_db
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importing, "MAX_BYTES", 1000)
    big = json.dumps([{"chat": {"messages": [{"role": "user", "content": "x" * 5000}]}}])
    response = upload(client_for(alice), big.encode())
    assert response.status_code == 400
    assert "The file is over 0 MB" in response.content.decode()
    assert not Conversation.objects.exists()


def test_a_cyclic_or_self_parented_mapping_ends_and_keeps_what_is_reachable() -> None:
    node = {"author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}}
    mapping = {
        "a": {"message": node, "parent": None, "children": ["b"]},
        "b": {
            "message": {**node, "author": {"role": "assistant"}},
            "parent": "a",
            "children": ["a", "b"],
        },
        "x": {"message": node, "parent": "y", "children": ["y"]},
        "y": {"message": node, "parent": "x", "children": ["x"]},
    }
    (read,) = importing.parse(json.dumps([{"title": "loop", "mapping": mapping}]).encode())
    assert [(m.key, m.parent, m.role) for m in read.messages] == [
        ("a", None, "user"),
        ("b", "a", "assistant"),
    ]


def test_a_very_long_message_is_cut_with_a_note() -> None:
    long = "y" * (importing.MAX_MESSAGE_CHARS + 10)
    assert importing._content(long).endswith("longer than this app keeps.]")
    assert len(importing._content(long)) < importing.MAX_MESSAGE_CHARS + 100
    assert importing._content("a\x00b") == "ab"


@pytest.mark.django_db
def test_the_import_page_is_reachable_from_the_sidebar(alice: Any) -> None:
    home = client_for(alice).get(reverse("chat:home")).content.decode()
    assert f'<a href="{reverse("chat:import")}">Import</a>' in home
    page = client_for(alice).get(reverse("chat:import")).content.decode()
    assert 'enctype="multipart/form-data"' in page
    assert Message.objects.count() == 0


@pytest.mark.django_db(transaction=True)
async def test_an_imported_answer_is_regenerated_with_the_model_chosen_and_not_continued(
    alice: Any,
) -> None:
    """An imported answer has no generation: Regenerate makes a new version by the picker's
    model; without one, and Continue (no token budget to enlarge), say so in words (both were
    a 500)."""
    data = (FIXTURES / "chatgpt_conversations.json").read_bytes()
    await sync_to_async(lambda: upload(client_for(alice), data))()
    answer = await Message.objects.filter(
        role="assistant", content__startswith="It has doubled"
    ).aget()
    client = AsyncClient()
    await client.aforce_login(alice)
    for url, posted, said in [
        (reverse("chat:retry", args=[answer.pk]), {}, IMPORTED_RETRY),
        (reverse("chat:continue", args=[answer.pk]), {}, IMPORTED_CONTINUE),
    ]:
        response = await client.post(url, posted, headers={"HX-Request": "true"})
        assert response.status_code == 200
        assert response["HX-Retarget"] == "#composer-error"
        assert escape(said) in response.content.decode()
    assert not await Generation.objects.aexists()

    response = await client.post(
        reverse("chat:retry", args=[answer.pk]),
        {"model": "emulator/echo"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert "HX-Retarget" not in response
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
    generation = await Generation.objects.select_related("message").aget()
    assert (generation.model, generation.status) == ("emulator/echo", "completed")
    assert generation.message is not None
    assert generation.message.parent_id == answer.parent_id  # a version of the imported answer
