"""The heartbeat sweep: generations whose worker died become `interrupted`, text kept."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from chatapp.streaming.sweep import sweep_stale_generations
from tests.chatapp.conftest import GroupListener, start_turn

pytestmark = [pytest.mark.django_db(transaction=True)]


async def orphan(user: Any, beat_seconds_ago: float) -> Generation:
    """A streaming generation whose worker is gone (as after a server restart)."""
    started = await start_turn(user, "hello", "emulator/chat")
    await Message.objects.filter(pk=started.assistant.pk).aupdate(content="partial text")
    beat = timezone.now() - timedelta(seconds=beat_seconds_ago)
    await Generation.objects.filter(pk=started.generation.pk).aupdate(heartbeat_at=beat, last_seq=4)
    return started.generation


async def test_stale_generation_is_interrupted_and_pages_are_told(alice: Any) -> None:
    generation = await orphan(alice, beat_seconds_ago=60)
    fresh = await orphan(alice, beat_seconds_ago=1)
    listener = await GroupListener(generation.conversation_id).join()
    assert await sweep_stale_generations() == 1
    swept = await Generation.objects.select_related("message").aget(pk=generation.pk)
    assert swept.status == "interrupted"
    assert swept.message.content == "partial text"
    assert swept.finished_at is not None
    assert (await Generation.objects.aget(pk=fresh.pk)).status == "streaming"
    done = await listener.until("done", within=2)
    assert done == {"t": "done", "g": generation.pk, "seq": 4, "status": "interrupted"}


async def test_a_generation_running_in_this_process_is_left_alone(alice: Any) -> None:
    started = await start_turn(alice, "otters", "emulator/long?tokens_per_second=100")
    task = worker.start(started.job)
    assert await sweep_stale_generations(stale_after=0) == 0
    assert (await Generation.objects.aget(pk=started.generation.pk)).status == "streaming"
    cancel = socket_messages.cancel(started.job.generation_pk)
    await get_channel_layer().send(started.job.owner_channel, cancel)
    await asyncio.wait_for(task, 10)


async def test_the_page_shows_an_interrupted_answer(alice: Any) -> None:
    from django.test import AsyncClient
    from django.urls import reverse

    generation = await orphan(alice, beat_seconds_ago=60)
    await sweep_stale_generations()
    client = AsyncClient()
    await client.aforce_login(alice)
    response = await client.get(reverse("chat:message", args=[generation.message_id]))
    html = response.content.decode()
    assert 'data-status="interrupted"' in html
    assert "The server stopped while this answer was being written" in html
    assert "partial text" in html


async def test_a_generation_whose_conversation_was_deleted_is_interrupted_and_kept(
    alice: Any,
) -> None:
    generation = await orphan(alice, beat_seconds_ago=60)
    await Conversation.objects.filter(pk=generation.conversation_id).adelete()

    assert await sweep_stale_generations() == 1

    swept = await Generation.objects.aget(pk=generation.pk)
    assert (swept.status, swept.conversation_id, swept.user_id) == ("interrupted", None, alice.pk)
    assert swept.cost_source == "pending", "the reconciliation still settles it"
