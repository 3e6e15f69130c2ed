"""The channel layer failing while an answer ends (Redis away as the last delta and `done` go).

Run in this process, with the layer's group sends failing as redis-py's do while its server is
down. The answer's final state must still be written (it used to be lost: the last delta's error
ended the worker before its final write), the page told of the end once the layer is back, and
nothing logged with a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from redis.exceptions import ConnectionError as RedisConnectionError

from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorURL
from tests.waiting import eventually

from .browser_model import ShownAnswer
from .inprocess import FinalWrites, follow, page_socket

pytestmark = [pytest.mark.django_db(transaction=True)]

PACED = "emulator/long?tokens_per_second=400&long_tokens=200"
SLOWER = "emulator/long?tokens_per_second=200&long_tokens=300"


def as_redis(layer: Any, monkeypatch: pytest.MonkeyPatch, group_send: Any) -> None:
    """The in-process layer made to send as Redis's does, through `group_send`, which fails as
    redis-py's does: without this its deltas skip `group_send` (`group_send_now`, a plain call
    the worker takes only from a layer with no network behind it)."""
    monkeypatch.setattr(layer, "group_send", group_send)
    monkeypatch.setattr(socket_messages, "immediate_group_send", lambda layer: None)


async def test_an_answer_ending_while_the_layer_is_down_is_saved_and_its_end_told(
    alice: Any, settings: Any, fault_emulator: EmulatorURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.LLM_BASE_URL = f"{fault_emulator}/numes/api/v1"
    configs.forget_configs()
    writes = FinalWrites(monkeypatch)
    layer = get_channel_layer()
    group_send = layer.group_send
    down = False
    refused = 0

    async def flaky_group_send(group: str, message: dict[str, Any]) -> None:
        nonlocal refused
        if down:
            refused += 1
            raise RedisConnectionError(
                "Error 111 connecting to 127.0.0.1:6379. Connection refused."
            )
        await group_send(group, message)

    as_redis(layer, monkeypatch, flaky_group_send)
    owner = await worker.owner_channel()
    started = await sync_to_async(create_turn)(
        alice, TurnRequest(text="A short story", answerer=Answerer(model=PACED)), owner
    )
    page = ShownAnswer(started.generation.pk)
    ws = await page_socket(alice, started.conversation.pk)
    try:
        task = worker.start(started.job)
        while not page.applied:
            page.handle(socket_messages.decode(await ws.receive_from(timeout=10)))
        down = True
        await eventually(
            lambda: writes.calls[started.generation.pk], what="the final write", within=10
        )
        down = False  # Redis is back: the end, still being retried, now goes
        await follow(ws, page)
        await task
    finally:
        await ws.disconnect()
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert refused > 0, "the layer was never down while the answer streamed"
    assert generation.status == Generation.Status.COMPLETED
    assert writes.calls[generation.pk] == 1
    assert page.dones == 1
    assert page.done == {
        "t": "done",
        "g": generation.pk,
        "seq": generation.last_seq,
        "status": "completed",
    }
    assert page.not_prefix_of(generation.message.content) == []
    assert len(page.content) < len(generation.message.content), "deltas were lost meanwhile"


async def test_deltas_lost_mid_stream_are_a_gap_the_page_fills_by_snapshot(
    alice: Any, settings: Any, fault_emulator: EmulatorURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when Redis blips while the page's socket stays open: the next delta that arrives is
    beyond the page's seq, so it asks for a snapshot, which replaces its text."""
    settings.LLM_BASE_URL = f"{fault_emulator}/numes/api/v1"
    configs.forget_configs()
    layer = get_channel_layer()
    group_send = layer.group_send
    down = False

    async def flaky_group_send(group: str, message: dict[str, Any]) -> None:
        if down:
            raise RedisConnectionError("Connection closed by server.")
        await group_send(group, message)

    as_redis(layer, monkeypatch, flaky_group_send)
    owner = await worker.owner_channel()
    started = await sync_to_async(create_turn)(
        alice, TurnRequest(text="A long story", answerer=Answerer(model=SLOWER)), owner
    )
    page = ShownAnswer(started.generation.pk)
    ws = await page_socket(alice, started.conversation.pk)
    try:
        task = worker.start(started.job)
        while len(page.applied) < 2:
            page.handle(socket_messages.decode(await ws.receive_from(timeout=10)))
        state = worker._running[started.generation.pk].state
        lost_from = state.seq + 1
        down = True
        await eventually(lambda: state.seq >= lost_from + 2, what="deltas sent into the outage")
        down = False
        await follow(ws, page)
        await task
    finally:
        await ws.disconnect()
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.status == Generation.Status.COMPLETED
    assert page.snapshot_asks == 1
    assert page.snapshots == 1
    assert lost_from not in page.applied
    assert page.not_prefix_of(generation.message.content) == []
    assert page.content == generation.message.content


async def test_a_cost_update_the_layer_cannot_carry_is_a_warning_not_a_crash(
    alice: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The answer is cut off (its cost left to the generation record); when the record settles
    it, the layer is down for that one message: the cost is saved and the worker ends quietly."""
    layer = get_channel_layer()
    group_send = layer.group_send

    async def no_updates(group: str, message: dict[str, Any]) -> None:
        if '"t":"updated"' in message["text"]:
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379.")
        await group_send(group, message)

    as_redis(layer, monkeypatch, no_updates)
    owner = await worker.owner_channel()
    started = await sync_to_async(create_turn)(
        alice, TurnRequest(text="A short story", answerer=Answerer(model="emulator/drop")), owner
    )
    await worker.start(started.job)  # raises if the worker died
    generation = await Generation.objects.aget(pk=started.generation.pk)
    assert generation.status == "incomplete"
    assert generation.cost_source == Generation.CostSource.RECORD
    assert "its cost update was not sent" in caplog.text
    assert "Traceback" not in caplog.text
