"""Asking with documents through the real send view (#48): the collections chosen with `#` (and
an assistant's) are searched over the real store and the emulator's `/embeddings` before the
request, the passages quoted in the context are on the generation's record and cited by the
answer; another user's collection adds nothing; the assistant's form offers only collections
its owner may use."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.urls import reverse

from chatapp.assistants.models import Assistant
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways import catalog
from chatapp.knowledge import ingest
from chatapp.knowledge.models import Collection, KnowledgeFile
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorURL
from tests.emulator_requests import record_chat_bodies

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("embedding_gateway")]

HTMX = {"HX-Request": "true"}
HANDBOOK = (
    "# Annual leave\n\nEvery employee receives twenty-eight days of paid annual leave per year.\n\n"
    "# Parking\n\nThe car park beneath the building has forty spaces, assigned by seniority.\n"
)


@pytest.fixture
def received(emulator_url: EmulatorURL, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    return record_chat_bodies(emulator_url.app, monkeypatch)


@pytest.fixture
async def indexed(handbook: Collection, added: Callable[..., KnowledgeFile]) -> KnowledgeFile:
    file = await sync_to_async(added)(handbook, "Handbook.md", HANDBOOK)
    await ingest.index(file.pk)
    return await KnowledgeFile.objects.aget(pk=file.pk, state=KnowledgeFile.State.READY)


async def sent(user: Any, **fields: Any) -> Generation:
    client = AsyncClient()
    await client.aforce_login(user)
    form = {"content": "How many days of annual leave do I get?", "model": "emulator/chat"}
    response = await client.post(reverse("chat:send_new"), form | fields, headers=HTMX)
    assert response.status_code == 200
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
    return await Generation.objects.select_related("message").alatest("pk")


async def test_a_collection_chosen_with_hash_is_quoted_and_cited(
    alice: Any, handbook: Collection, indexed: KnowledgeFile, received: list[dict[str, Any]]
) -> None:
    generation = await sent(alice, collections=[str(handbook.pk)])

    assert generation.status == "completed"
    first = generation.passages[0]
    assert (first["file_name"], first["heading"]) == ("Handbook.md", "Annual leave")
    assert "twenty-eight days" in first["text"]
    assert generation.message is not None
    assert "[1]" in generation.message.content
    assert 'class="passage-ref"' in generation.message.html
    [body] = [b for b in received if b["model"] == "emulator/chat"]
    assert body["messages"][-2]["role"] == "system"
    assert "twenty-eight days" in body["messages"][-2]["content"]
    # The page shows what was drawn on, and the passage its [1] opens.
    client = AsyncClient()
    await client.aforce_login(alice)
    url = reverse("chat:conversation", args=[generation.conversation_id])
    page = (await client.get(url)).content.decode()
    count = len(generation.passages)
    words = "1 passage" if count == 1 else f"{count} passages"
    assert f"<summary>{words} from Handbook.md</summary>" in page
    assert f'id="passage-m{generation.message.pk}-1"' in page


async def test_the_questions_embedding_is_on_the_ledger_for_its_conversation_and_message(
    alice: Any, handbook: Collection, indexed: KnowledgeFile
) -> None:
    """Embedded before the new chat and its message exist, then linked to both: the admin's
    cost history says what it was for, not "a deleted collection or question"."""
    generation = await sent(alice, collections=[str(handbook.pk)])

    embedding = await Generation.objects.filter(kind="embedding", collection=None).aget()
    assert embedding.conversation_id == generation.conversation_id
    question = await Message.objects.aget(conversation_id=generation.conversation_id, role="user")
    assert embedding.question_id == question.pk


async def test_another_users_collection_adds_nothing(
    bob: Any, handbook: Collection, indexed: KnowledgeFile, received: list[dict[str, Any]]
) -> None:
    generation = await sent(bob, collections=[str(handbook.pk)], knowledge_files=[str(indexed.pk)])

    assert generation.status == "completed"
    assert generation.passages == []
    [body] = [b for b in received if b["model"] == "emulator/chat"]
    assert all("<source" not in str(m["content"]) for m in body["messages"])


async def test_an_assistants_collections_are_drawn_on_in_every_answer(
    alice: Any, handbook: Collection, indexed: KnowledgeFile
) -> None:
    assistant = await Assistant.objects.acreate(owner=alice, name="HR")
    await assistant.collections.aadd(handbook)

    first = await sent(alice, assistant=str(assistant.pk))
    assert first.passages
    conversation = await Conversation.objects.aget(pk=first.conversation_id)
    assert conversation.assistant_id == assistant.pk
    client = AsyncClient()
    await client.aforce_login(alice)
    url = reverse("chat:send", args=[conversation.pk])
    form = {"content": "Where do I park?", "model": "emulator/chat"}
    assert (await client.post(url, form, headers=HTMX)).status_code == 200
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
    second = await Generation.objects.alatest("pk")
    assert second.pk != first.pk
    assert "forty spaces" in second.passages[0]["text"]


def test_the_assistant_form_offers_only_collections_its_owner_may_use(
    alice: Any, bob: Any, handbook: Collection
) -> None:
    Collection.objects.create(owner=bob, name="Bob's secrets")
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("chat:new_assistant")).content.decode()
    assert "Handbook" in page
    assert "Bob&#x27;s secrets" not in page
    assert "Bob's secrets" not in page
    response = client.post(
        reverse("chat:new_assistant"),
        {"name": "HR", "collections": [str(handbook.pk)], "model": ""},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(Assistant.objects.get(name="HR").collections.all()) == [handbook]


async def test_an_image_model_is_sent_the_text_alone_and_nothing_is_searched(
    alice: Any, handbook: Collection, indexed: KnowledgeFile
) -> None:
    """An image is drawn from the message's text: the documents are not searched, and no
    embedding call is made (or paid) for it."""
    (choice,) = [c.value for g in await catalog.catalog() for c in g.choices if c.generates_images]
    embeddings = await Generation.objects.filter(kind="embedding").acount()
    generation = await sent(alice, model=choice, collections=[str(handbook.pk)])

    assert generation.kind == Generation.Kind.IMAGE
    assert generation.passages == []
    assert await Generation.objects.filter(kind="embedding").acount() == embeddings
