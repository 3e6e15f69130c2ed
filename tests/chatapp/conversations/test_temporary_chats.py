"""Temporary chats (#41): out of the sidebar and search, said so in their header, deleted once
no page's socket has watched them for the grace period (or swept when left behind), with their
generations and costs kept in the ledger. Through the real ASGI stack and the emulator."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from chatapp.conversations import temporary
from chatapp.conversations.models import Conversation
from chatapp.costs.models import Generation
from chatapp.streaming import worker
from tests.chatapp.ws.test_consumers import connect, receive, socket
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
NOTE = "Temporary chat: not saved; its cost is still recorded."


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


async def started_temporary(user: Any, text: str = "A secret question") -> Conversation:
    client = await logged_in(user)
    response = await client.post(
        reverse("chat:send_new"),
        {"content": text, "model": "emulator/echo", "temporary": "1"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert NOTE in response.text, "its header says so"
    assert 'id="conversation-item-' not in response.text, "no sidebar entry is added"
    await workers_finished()
    conversation = await Conversation.objects.aget(user=user, temporary=True)
    assert conversation.left_at is not None, "left until a socket watches it"
    return conversation


async def test_it_is_neither_listed_nor_found(alice: Any) -> None:
    conversation = await started_temporary(alice, "Zanzibar plans")
    kept = await Conversation.objects.acreate(user=alice, title="Zanzibar kept")
    client = await logged_in(alice)
    page = (await client.get(reverse("chat:home"))).text
    assert f"conversation-item-{kept.pk}" in page
    assert f"conversation-item-{conversation.pk}" not in page
    results = (await client.get(reverse("chat:search"), {"q": "Zanzibar"})).text
    assert "1 conversation matches" in results
    assert f"/c/{kept.pk}/" in results
    assert f"/c/{conversation.pk}/" not in results
    # A follow-up does not move it into the sidebar either.
    response = await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "More", "model": "emulator/echo"},
        headers=HTMX,
    )
    await workers_finished()
    assert "conversation-list" not in response.text


async def test_it_goes_once_its_last_page_closes_and_its_costs_stay(
    alice: Any, settings: Any
) -> None:
    settings.CHAT_TEMPORARY_GRACE = 0.6
    conversation = await started_temporary(alice)
    generation = await Generation.objects.aget(conversation=conversation)
    first, second = await socket(conversation.pk, alice), await socket(conversation.pk, alice)
    await connect(first)
    await connect(second)
    await conversation.arefresh_from_db()
    assert (conversation.watchers, conversation.left_at) == (2, None)
    await first.disconnect()
    await asyncio.sleep(1.0)  # past the grace: one page still shows it
    assert await Conversation.objects.filter(pk=conversation.pk).aexists()
    await second.disconnect()

    async def gone() -> bool:
        return not await Conversation.objects.filter(pk=conversation.pk).aexists()

    await eventually(gone, what="the temporary chat to be deleted", within=5)
    await generation.arefresh_from_db()
    assert generation.conversation_id is None
    assert generation.status == Generation.Status.COMPLETED
    assert generation.user_id == alice.pk, "the ledger still knows whose spend it was"


async def test_a_reload_within_the_grace_keeps_it(alice: Any, settings: Any) -> None:
    settings.CHAT_TEMPORARY_GRACE = 0.8
    conversation = await started_temporary(alice)
    page = await socket(conversation.pk, alice)
    await connect(page)
    await page.disconnect()
    reloaded = await socket(conversation.pk, alice)
    await connect(reloaded)
    await asyncio.sleep(1.5)
    assert await Conversation.objects.filter(pk=conversation.pk).aexists()
    await reloaded.disconnect()


async def test_going_to_another_conversation_leaves_it(alice: Any, settings: Any) -> None:
    settings.CHAT_TEMPORARY_GRACE = 0.3
    conversation = await started_temporary(alice)
    kept = await Conversation.objects.acreate(user=alice, title="Kept")
    page = await socket(conversation.pk, alice)
    await connect(page)
    await page.send_to(text_data=orjson.dumps({"t": "watch", "c": kept.pk}).decode())
    assert await receive(page) == {"t": "watching", "c": kept.pk}

    async def gone() -> bool:
        return not await Conversation.objects.filter(pk=conversation.pk).aexists()

    await eventually(gone, what="the temporary chat to be deleted", within=5)
    assert await Conversation.objects.filter(pk=kept.pk).aexists()
    await page.disconnect()


async def test_the_sweep_deletes_those_left_behind_only(alice: Any, settings: Any) -> None:
    settings.CHAT_TEMPORARY_GRACE = 10
    now = timezone.now()
    create = Conversation.objects.acreate
    left = await create(user=alice, temporary=True, left_at=now - timedelta(seconds=30))
    just_left = await create(user=alice, temporary=True, left_at=now - timedelta(seconds=5))
    watched = await create(user=alice, temporary=True, watchers=1)
    never_watched = await create(user=alice, temporary=True)
    kept = await create(user=alice, left_at=now - timedelta(days=3))
    idle = await create(user=alice, temporary=True, watchers=1)
    await Conversation.objects.filter(pk__in=[idle.pk, kept.pk]).aupdate(
        updated_at=now - timedelta(days=2)
    )
    ledger = await Generation.objects.acreate(
        conversation=left, model="m", cost=Decimal("0.25"), status=Generation.Status.COMPLETED
    )
    assert await temporary.sweep_left_behind() == 2
    remaining = {pk async for pk in Conversation.objects.values_list("pk", flat=True)}
    assert remaining == {just_left.pk, watched.pk, never_watched.pk, kept.pk}
    await ledger.arefresh_from_db()
    assert (ledger.conversation_id, ledger.cost) == (None, Decimal("0.25"))


async def test_the_new_chat_screen_offers_it_and_says_what_it_means(alice: Any) -> None:
    html = (await (await logged_in(alice)).get(reverse("chat:home"))).text
    assert 'aria-describedby="temporary-note"> Temporary chat' in html
    assert f'<p id="temporary-note" class="temporary-note" role="note">{NOTE}</p>' in html


async def test_a_socket_counts_in_only_once_per_conversation(alice: Any) -> None:
    conversation = await started_temporary(alice)
    page = await socket(conversation.pk, alice)
    await connect(page)
    await page.send_to(text_data=orjson.dumps({"t": "watch", "c": conversation.pk}).decode())
    assert await receive(page) == {"t": "watching", "c": conversation.pk}
    await conversation.arefresh_from_db()
    assert conversation.watchers == 1
    await page.disconnect()
    await sync_to_async(conversation.refresh_from_db)()
    assert (conversation.watchers, conversation.left_at is not None) == (0, True)
