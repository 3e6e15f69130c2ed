"""A page's websocket dropped mid-stream and opened again: the page catches up by snapshot.

While the socket is down its deltas go nowhere (its channel left the group). The page keeps its
state, as chat.js does across a reconnect; the new socket watches the conversation again, the
worker answers with a snapshot at its seq, and the deltas after it follow: no gap, no duplicate.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorURL
from tests.waiting import eventually

from .browser_model import ShownAnswer
from .inprocess import follow, page_socket

pytestmark = [pytest.mark.django_db(transaction=True)]

PACED = "emulator/long?tokens_per_second=300&long_tokens=300"


async def test_a_socket_dropped_and_reopened_mid_stream_sees_no_gap_and_no_duplicate(
    alice: Any, settings: Any, fault_emulator: EmulatorURL
) -> None:
    settings.LLM_BASE_URL = f"{fault_emulator}/numes/api/v1"
    configs.forget_configs()
    owner = await worker.owner_channel()
    started = await sync_to_async(create_turn)(
        alice, TurnRequest(text="A long story", answerer=Answerer(model=PACED)), owner
    )
    page = ShownAnswer(started.generation.pk)
    first = await page_socket(alice, started.conversation.pk)
    task = worker.start(started.job)
    try:
        while len(page.applied) < 3:
            page.handle(socket_messages.decode(await first.receive_from(timeout=10)))
    finally:
        await first.disconnect()
    seq_at_drop = page.seq
    # What the worker sends while no socket is open for the page is lost to it.
    worker_state = worker._running[started.generation.pk].state
    await eventually(lambda: worker_state.seq >= seq_at_drop + 3, what="deltas while away")
    second = await page_socket(alice, started.conversation.pk, page)
    try:
        await follow(second, page)
    finally:
        await second.disconnect()
    await task
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    stored = generation.message.content
    assert generation.status == Generation.Status.COMPLETED
    assert page.snapshots == 1, "the reconnected page was caught up by one snapshot"
    after = [seq for seq in page.applied if seq > seq_at_drop]
    assert after, "deltas followed the snapshot"
    assert after == list(range(after[0], generation.last_seq + 1)), "a gap or a duplicate"
    assert after[0] > seq_at_drop + 3, "the deltas sent while away were not replayed"
    assert page.not_prefix_of(stored) == []
    assert page.content == stored
    assert page.done is not None
    assert page.done["status"] == Generation.Status.COMPLETED
