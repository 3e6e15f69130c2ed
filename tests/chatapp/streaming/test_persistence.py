"""The final write of a generation, its cost reconciliation, and the sweep's interruption.

These run on persistence's own thread, so the database is a committed (`transaction=True`) one.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from chatapp.conversations.jobs import JobEnd, Status
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.presentation import warning_texts
from chatapp.costs.costing import MAX_RECORD_ATTEMPTS, Lookup
from chatapp.costs.models import Generation
from chatapp.costs.settling import settle_cost
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.streaming.live_state import LiveState
from chatapp.streaming.persistence import AnswerFinal, mark_interrupted, save_final
from gateway_client.accumulator import Completion
from gateway_client.client import GenerationRecord
from gateway_client.errors import ErrorInfo
from gateway_client.events import Cost, Event, ReasoningDelta, TextDelta

pytestmark = [pytest.mark.django_db(transaction=True)]

INTERRUPTED = "The server stopped while this answer was being written; the text so far is kept."


async def streaming(user: Any, **fields: Any) -> Generation:
    conversation = await Conversation.objects.acreate(user=user, title="t")
    message = await Message.objects.acreate(conversation=conversation, role="assistant")
    return await Generation.objects.acreate(
        message=message, conversation=conversation, model="emulator/chat", **fields
    )


async def reread(generation: Generation) -> Generation:
    return await Generation.objects.select_related("message").aget(pk=generation.pk)


def sent(*deltas: list[Event]) -> LiveState:
    """A live state that sent each list of events as one delta."""
    state = LiveState()
    for events in deltas:
        for event in events:
            state.apply(event)
        state.take_delta()
    return state


def record(**fields: Any) -> GenerationRecord:
    values: dict[str, Any] = {
        "id": "gen-1",
        "outcome": "completed",
        "finish_reason": "stop",
        "prompt_tokens": 11,
        "completion_tokens": 8,
        "reasoning_tokens": None,
        "cached_tokens": 0,
        "cost": Cost(8.6e-06, "credits", False),
        "raw": {},
    }
    return GenerationRecord(**{**values, **fields})


# --- save_final ---------------------------------------------------------------------------------


async def test_the_final_state_is_the_sent_text_and_the_streams_record(alice: Any) -> None:
    generation = await streaming(alice)
    state = sent([TextDelta("Hello "), ReasoningDelta("hm")], [TextDelta("world")])
    details = [{"type": "reasoning.encrypted", "data": "c2ln"}]
    completion = Completion(
        outcome="complete",
        generation_id="gen-1",
        request_id="req-from-stream",
        model="numes/otter-1",
        finish_reason="stop",
        content="Hello world",
        reasoning="hm",
        reasoning_details=details,
        usage={"prompt_tokens": 3, "completion_tokens": 4, "cost": 0.25},
        cost=Cost(0.25, "credits", False),
        prompt_tokens=3,
        completion_tokens=4,
        reasoning_tokens=1,
        cached_tokens=2,
    )
    final = await save_final(
        generation.pk, state, JobEnd(Status.COMPLETED, completion=completion), 120, None
    )
    assert final == AnswerFinal(upstream_id="gen-1", cost_pending=False)
    row = await reread(generation)
    assert row.status == "completed"
    assert row.message.content == "Hello world"
    assert row.message.reasoning == "hm"
    assert row.message.reasoning_details == details
    assert row.last_seq == 2
    assert row.ttft_ms == 120
    assert row.first_token_at == row.started_at + timedelta(milliseconds=120)
    assert row.finished_at is not None
    assert row.heartbeat_at == row.finished_at
    assert row.upstream_id == "gen-1"
    assert row.request_id == "req-from-stream"
    assert row.served_model == "numes/otter-1"
    assert row.finish_reason == "stop"
    assert row.usage == {"prompt_tokens": 3, "completion_tokens": 4, "cost": 0.25}
    assert (row.prompt_tokens, row.completion_tokens) == (3, 4)
    assert (row.reasoning_tokens, row.cached_tokens) == (1, 2)
    assert row.cost == Decimal("0.25")
    assert row.cost_unit == "credits"
    assert row.cost_source == "stream"
    assert (row.error_status, row.error_code, row.error_type, row.error_message) == (
        None,
        "",
        "",
        "",
    )


async def test_the_final_text_is_what_browsers_were_sent(alice: Any) -> None:
    generation = await streaming(alice)
    completion = Completion(outcome="complete", content="Hello world")
    end = JobEnd(Status.CANCELLED, completion=completion)
    await save_final(generation.pk, sent([TextDelta("Hello")]), end, None, "req-1")
    row = await reread(generation)
    assert row.message.content == "Hello"
    assert row.status == "cancelled"
    assert row.request_id == "req-1"
    assert row.ttft_ms is None
    assert row.first_token_at is None


async def test_an_answer_that_ended_meanwhile_keeps_its_state_and_gains_only_text(
    alice: Any,
) -> None:
    """The sweep interrupted it while the database was away; the late final write keeps that one
    terminal state, and keeps the text browsers were shown."""
    generation = await streaming(alice)
    await Message.objects.filter(pk=generation.message_id).aupdate(content="Hel")
    await Generation.objects.filter(pk=generation.pk).aupdate(status="interrupted")
    completion = Completion(outcome="complete", content="Hello world", finish_reason="stop")
    end = JobEnd(Status.COMPLETED, completion=completion)
    state = sent([TextDelta("Hello world")])
    final = await save_final(generation.pk, state, end, 5, "req-1", next_round_tools=())
    row = await reread(generation)
    assert row.status == "interrupted"
    assert row.message.content == "Hello world"
    assert row.finish_reason == ""
    assert final.next_job is None
    assert not final.cost_pending
    # Written twice (a retry after a commit that went through): the second changes nothing.
    await save_final(generation.pk, state, end, 5, "req-1")
    assert (await reread(generation)).message.content == "Hello world"


async def test_the_readers_warnings_are_kept_and_shown(alice: Any) -> None:
    generation = await streaming(alice)
    completion = Completion(outcome="complete", warnings=("unread_parts",))
    await save_final(
        generation.pk, sent(), JobEnd(Status.COMPLETED, completion=completion), None, None
    )
    row = await reread(generation)
    assert row.warnings == ["unread_parts"]
    assert warning_texts(row) == [
        "The gateway sent parts this app could not read, so the answer shows empty."
    ]


@pytest.mark.parametrize(
    ("error", "columns"),
    [
        (
            ErrorInfo(503, 503, "provider_unavailable", "provider became unavailable", "req-e"),
            (503, "503", "provider_unavailable", "provider became unavailable"),
        ),
        (
            ErrorInfo(429, "rate_limited", "rate_limit_error", "Slow down"),
            (429, "rate_limited", "rate_limit_error", "Slow down"),
        ),
        (
            ErrorInfo(None, None, None, "the connection closed"),
            (None, "", "", "the connection closed"),
        ),
        (ErrorInfo(None, "c" * 150, "t" * 150, "long"), (None, "c" * 100, "t" * 100, "long")),
    ],
)
async def test_save_final_writes_the_error_info(
    alice: Any, error: ErrorInfo, columns: tuple[Any, ...]
) -> None:
    generation = await streaming(alice)
    end = JobEnd(Status.FAILED, error, retry_after=2.5)
    final = await save_final(generation.pk, LiveState(), end, None, None)
    refused = columns[0] is not None
    assert final == AnswerFinal(upstream_id="", cost_pending=not refused)
    row = await reread(generation)
    assert row.status == "failed"
    assert (row.error_status, row.error_code, row.error_type, row.error_message) == columns
    assert row.retry_after == 2.5
    assert row.message.content == ""
    # Refused with an HTTP status before a generation ID: not billed; a dropped connection may
    # have been: left to be estimated or explained.
    assert row.cost_source == ("not_billed" if refused else "pending")
    if refused:
        assert row.cost_note == "refused before the answer began"


@pytest.mark.parametrize(
    ("generation_id", "cost", "source", "pending"),
    [
        ("gen-1", None, "pending", True),
        (None, None, "pending", True),  # no ID, yet not refused: estimated or explained later
        ("gen-1", Cost(12, "micro_usd", True), "estimate", False),
    ],
)
async def test_whether_the_cost_is_left_to_reconcile(
    alice: Any, generation_id: str | None, cost: Cost | None, source: str, pending: bool
) -> None:
    generation = await streaming(alice)
    completion = Completion(outcome="error", generation_id=generation_id, cost=cost)
    end = JobEnd(Status.FAILED, ErrorInfo(None, None, None, "x"), completion=completion)
    final = await save_final(generation.pk, LiveState(), end, None, None, "numes")
    assert final == AnswerFinal(
        upstream_id=generation_id or "", cost_pending=pending, record_expected=bool(generation_id)
    )
    assert (await reread(generation)).cost_source == source


async def test_save_final_after_the_conversation_was_deleted_keeps_the_ledger(alice: Any) -> None:
    generation = await streaming(alice)
    await Conversation.objects.filter(pk=generation.conversation_id).adelete()
    end = JobEnd(Status.CANCELLED, completion=Completion(outcome="cancelled", generation_id="g"))
    final = await save_final(generation.pk, sent([TextDelta("x")]), end, 5, None, "numes")
    assert final == AnswerFinal(upstream_id="g", cost_pending=True, record_expected=True)
    row = await reread(generation)
    assert (row.status, row.upstream_id, row.user_id) == ("cancelled", "g", alice.pk)
    assert (row.conversation_id, row.message_id) == (None, None)
    assert not await Message.objects.aexists(), "the text went with the conversation"


# --- settle_cost --------------------------------------------------------------------------------


async def test_reconciling_fills_the_cost_from_the_record_once(alice: Any) -> None:
    generation = await streaming(
        alice, status="cancelled", upstream_id="gen-1", cost_source="pending", reasoning_tokens=2
    )
    assert (await settle_cost(generation.pk, Lookup(record()))).changed is True
    row = await reread(generation)
    assert row.cost_source == "record"
    assert row.cost == Decimal("0.0000086")
    assert row.cost_unit == "credits"
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (11, 8, 0)
    assert row.reasoning_tokens == 2, "a count the record does not give is kept"
    assert row.reconcile_attempts == 1
    # Idempotent: a second reconciliation (another process, the sweep) changes nothing.
    later = record(cost=Cost(99, "credits", False), prompt_tokens=1)
    assert (await settle_cost(generation.pk, Lookup(later))).changed is False
    again = await reread(generation)
    assert (again.cost, again.prompt_tokens, again.reconcile_attempts) == (row.cost, 11, 1)


async def test_a_final_record_without_a_cost_and_no_price_is_unavailable_with_the_reason(
    alice: Any,
) -> None:
    generation = await streaming(
        alice, status="failed", upstream_id="gen-1", cost_source="pending", dialect="numes"
    )
    assert (await settle_cost(generation.pk, Lookup(record(cost=None)))).changed is True
    row = await reread(generation)
    assert row.cost is None
    assert row.cost_source == "unavailable"
    assert row.cost_note == (
        f"Numes reported no cost for this answer and no price is configured for {row.model}"
    )
    assert (await settle_cost(generation.pk, Lookup(record()))).changed is False


async def test_a_gateway_that_is_down_leaves_the_cost_pending_without_counting(
    alice: Any,
) -> None:
    generation = await streaming(alice, status="failed", upstream_id="gen-1", cost_source="pending")
    for _ in range(10):
        assert (await settle_cost(generation.pk, Lookup(reached=False))).changed is False
    row = await reread(generation)
    assert (row.cost_source, row.reconcile_attempts) == ("pending", 0)
    assert (await settle_cost(generation.pk, Lookup(record()))).changed is True
    assert (await reread(generation)).cost_source == "record"


async def test_a_record_not_found_is_asked_again_then_given_up(alice: Any) -> None:
    generation = await streaming(alice, status="failed", upstream_id="gen-1", cost_source="pending")
    for _ in range(MAX_RECORD_ATTEMPTS - 1):
        assert (await settle_cost(generation.pk, Lookup())).changed is False
    assert (await reread(generation)).cost_source == "pending"
    assert (await settle_cost(generation.pk, Lookup())).changed is True
    assert (await reread(generation)).cost_source == "unavailable"


@pytest.mark.parametrize("source", ["stream", "estimate", "record", "unavailable", "not_billed"])
async def test_reconciling_leaves_a_settled_cost_alone(alice: Any, source: str) -> None:
    cost = None if source in ("unavailable", "not_billed") else Decimal("0.5")
    generation = await streaming(
        alice,
        status="completed",
        upstream_id="gen-1",
        cost=cost,
        cost_unit="credits",
        cost_source=source,
    )
    assert (await settle_cost(generation.pk, Lookup(record()))).changed is False
    row = await reread(generation)
    assert (row.cost, row.cost_source, row.reconcile_attempts) == (cost, source, 0)


async def test_the_cost_of_a_deleted_conversations_answer_still_settles(alice: Any) -> None:
    generation = await streaming(alice, status="cancelled", upstream_id="gen-1")
    await Conversation.objects.filter(pk=generation.conversation_id).adelete()
    assert (await settle_cost(generation.pk, Lookup(record()))).changed is True
    row = await reread(generation)
    assert (row.cost_source, row.cost, row.user_id) == ("record", Decimal("0.0000086"), alice.pk)


async def test_a_deleted_answer_without_counts_is_unavailable_with_the_reason(alice: Any) -> None:
    generation = await streaming(alice, status="cancelled", dialect="osmexo")
    await Conversation.objects.filter(pk=generation.conversation_id).adelete()
    await ModelPrice.objects.acreate(
        gateway=await Gateway.objects.acreate(name="g", base_url="x", cost_unit="credits"),
        model="emulator/chat",
        prompt=Decimal(1),
        completion=Decimal(1),
    )
    await Generation.objects.filter(pk=generation.pk).aupdate(
        gateway=await Gateway.objects.aget(name="g")
    )
    assert (await settle_cost(generation.pk, Lookup(expected=False))).changed is True
    row = await reread(generation)
    assert (row.cost, row.cost_source) == (None, "unavailable")
    assert row.cost_note == (
        "Osmexo reported no token counts, and the answer was deleted before they could be "
        "counted from its text"
    )


# --- mark_interrupted ---------------------------------------------------------------------------


async def test_only_streaming_generations_are_interrupted(alice: Any) -> None:
    named = await streaming(alice, upstream_id="gen-a", last_seq=4)
    unnamed = await streaming(alice, last_seq=0)
    costed = await streaming(
        alice, upstream_id="gen-c", cost=Decimal("0.1"), cost_unit="credits", cost_source="stream"
    )
    finished = await streaming(alice, status="completed", cost_source="stream")
    elsewhere = await streaming(alice)  # streaming, but not one of those asked about
    asked = [named.pk, unnamed.pk, costed.pk, finished.pk]
    done = await mark_interrupted(asked)
    assert sorted(done) == sorted(
        [
            (named.pk, named.conversation_id, 4),
            (unnamed.pk, unnamed.conversation_id, 0),
            (costed.pk, costed.conversation_id, 0),
        ]
    )
    for generation, source in ((named, "pending"), (unnamed, "pending"), (costed, "stream")):
        row = await reread(generation)
        assert row.status == "interrupted"
        assert row.finished_at is not None
        assert row.error_type == "interrupted"
        assert row.error_message == INTERRUPTED
        assert row.cost_source == source
    untouched = await reread(finished)
    assert (untouched.status, untouched.error_type, untouched.finished_at) == (
        "completed",
        "",
        None,
    )
    assert (await reread(elsewhere)).status == "streaming"
    assert await mark_interrupted(asked) == [], "nothing is streaming any more"
