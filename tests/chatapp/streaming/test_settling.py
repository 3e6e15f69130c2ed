"""`settling.settle`: the one way a generation's cost settles after its terminal write (an
answer, a title, a read aloud, the sweep), and when the user's tabs are told their new spend."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest
from channels.layers import get_channel_layer

from chatapp.costs import settling, spend_push
from chatapp.costs.costing import Lookup
from chatapp.costs.models import Generation
from chatapp.costs.settling import FinalState
from chatapp.gateways.clients import shared_client
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.client import GenerationRecord
from gateway_client.events import Cost
from tests.chatapp.conftest import start_turn

pytestmark = [pytest.mark.django_db(transaction=True)]


class SpendTabs:
    """A tab of the user's, listening for their spend; each push it got, in order."""

    def __init__(self, user_pk: int) -> None:
        self.layer = get_channel_layer()
        self.user_pk = user_pk
        self.channel = ""

    async def join(self) -> SpendTabs:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(socket_messages.user_group_name(self.user_pk), self.channel)
        return self

    def pushes(self) -> list[str]:
        """What arrived so far: `cost_settled` returns once its push is sent, so nothing is
        on its way when `settle` has returned."""
        kinds: list[str] = []
        queue = self.layer.channels.get(self.channel)
        while queue is not None and not queue.empty():
            _, message = queue.get_nowait()
            kinds += [payload["t"] for payload in socket_messages.decode_frame(message["text"])]
        return kinds


def record(upstream_id: str) -> GenerationRecord:
    return GenerationRecord(
        id=upstream_id,
        outcome="completed",
        finish_reason="stop",
        prompt_tokens=3,
        completion_tokens=2,
        reasoning_tokens=None,
        cached_tokens=0,
        cost=Cost(0.25, "credits", False),
        raw={},
    )


async def ended(user: Any) -> tuple[Any, Generation]:
    """A turn streamed to its end through the emulator, its cost put back to `pending` as if
    the stream had not reported it."""
    started = await start_turn(user, "hello", "emulator/echo")
    await worker.start(started.job)
    await Generation.objects.filter(pk=started.job.generation_pk).aupdate(
        cost=None, cost_source=Generation.CostSource.PENDING, reconcile_attempts=0
    )
    return started.job, await Generation.objects.aget(pk=started.job.generation_pk)


def pending(generation: Generation) -> FinalState:
    return FinalState(upstream_id=generation.upstream_id, cost_pending=True, record_expected=True)


async def test_a_pending_cost_is_looked_up_in_the_gateways_record_and_the_spend_pushed(
    alice: Any,
) -> None:
    job, generation = await ended(alice)
    assert generation.upstream_id, "the emulator keeps a record of the answer"
    tabs = await SpendTabs(alice.pk).join()
    order: list[str] = []

    async def changed() -> None:
        order.append("changed")
        order.extend(tabs.pushes())

    client = shared_client(job.gateway)
    assert await settling.settle(
        client, generation.pk, alice.pk, pending(generation), changed=changed
    )
    row = await Generation.objects.aget(pk=generation.pk)
    assert (row.cost_source, row.reconcile_attempts) == ("record", 1)
    assert row.cost is not None
    assert order == ["changed"], "the page hears of the new cost before the spend push"
    assert tabs.pushes() == ["spend"]


async def test_a_cost_the_stream_reported_is_pushed_without_a_look_up(alice: Any) -> None:
    job, generation = await ended(alice)
    await Generation.objects.filter(pk=generation.pk).aupdate(cost=Decimal(1), cost_source="stream")
    tabs = await SpendTabs(alice.pk).join()
    final = FinalState(upstream_id=generation.upstream_id, cost_pending=False, record_expected=True)
    assert not await settling.settle(shared_client(job.gateway), generation.pk, alice.pk, final)
    row = await Generation.objects.aget(pk=generation.pk)
    assert (row.cost_source, row.reconcile_attempts) == ("stream", 0), "nothing was asked"
    assert tabs.pushes() == ["spend"]


async def test_a_cost_left_pending_pushes_nothing(alice: Any) -> None:
    """A pending cost is in no total: a round that leaves it pending changes no figure."""
    job, generation = await ended(alice)
    tabs = await SpendTabs(alice.pk).join()
    down = Lookup(reached=False)
    client = shared_client(job.gateway)
    assert not await settling.settle(
        client, generation.pk, alice.pk, pending(generation), lookup=down
    )
    assert (await Generation.objects.aget(pk=generation.pk)).cost_source == "pending"
    assert tabs.pushes() == []


async def test_a_lookup_already_made_is_used_and_not_asked_again(alice: Any) -> None:
    """A read aloud asks for the record to know its status, then settles with the same."""
    job, generation = await ended(alice)
    tabs = await SpendTabs(alice.pk).join()
    given = Lookup(record(generation.upstream_id))
    client = shared_client(job.gateway)
    assert await settling.settle(client, generation.pk, alice.pk, pending(generation), lookup=given)
    row = await Generation.objects.aget(pk=generation.pk)
    assert (row.cost_source, row.cost) == ("record", Decimal("0.25")), "the record given"
    assert tabs.pushes() == ["spend"]


async def test_a_failed_settle_is_logged_and_left_to_the_sweep(
    alice: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    job, generation = await ended(alice)
    tabs = await SpendTabs(alice.pk).join()

    async def refused(*_: Any) -> None:
        raise RuntimeError("the database is away")

    monkeypatch.setattr(settling, "settle_cost", refused)
    with caplog.at_level(logging.ERROR, logger="chatapp.costs.settling"):
        settled = await settling.settle(
            shared_client(job.gateway), generation.pk, alice.pk, pending(generation)
        )
    assert settled is False
    assert f"Settling the cost of generation {generation.pk} failed" in caplog.text
    assert (await Generation.objects.aget(pk=generation.pk)).cost_source == "pending"
    assert tabs.pushes() == []


async def test_a_deleted_user_is_told_nothing(alice: Any) -> None:
    job, generation = await ended(alice)
    tabs = await SpendTabs(alice.pk).join()
    given = Lookup(record(generation.upstream_id))
    client = shared_client(job.gateway)
    assert await settling.settle(client, generation.pk, None, pending(generation), lookup=given)
    assert tabs.pushes() == []


def test_spend_push_is_the_one_way_a_cost_is_announced() -> None:
    """Only `settling` (and its tests) push the spend when a cost settles: no path of its own."""
    import pathlib

    root = pathlib.Path(settling.__file__).parents[1]
    callers = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "cost_settled(" in path.read_text() and path.name != "spend_push.py"
    )
    assert callers == ["costs/settling.py"]
    assert spend_push.cost_settled.__module__ == "chatapp.costs.spend_push"
