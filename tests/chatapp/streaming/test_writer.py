"""The partial-answer writer: one batch writes every running answer, and never a finished one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatapp.conversations.jobs import JobEnd, Status
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.streaming import writer
from chatapp.streaming.live_state import LiveState
from chatapp.streaming.persistence import save_final
from chatapp.streaming.writer import PartialRow
from gateway_client.accumulator import Completion
from gateway_client.errors import ErrorInfo
from gateway_client.events import TextDelta

pytestmark = [pytest.mark.django_db(transaction=True)]

CALL = {"index": 0, "id": "call_1", "name": "get_weather", "arguments": "{}"}


async def streaming(user: Any, content: str = "") -> Generation:
    conversation = await Conversation.objects.acreate(user=user, title="t")
    message = await Message.objects.acreate(
        conversation=conversation, role="assistant", content=content
    )
    return await Generation.objects.acreate(
        message=message, conversation=conversation, model="emulator/chat"
    )


def row(generation: Generation, seq: int, text: Any = None, **fields: Any) -> PartialRow:
    values: dict[str, Any] = {"upstream_id": None, "ttft_ms": None, **fields}
    return PartialRow(generation.pk, generation.message_id, seq, text=text, **values)


async def write(rows: list[PartialRow]) -> None:
    """One batch, on the writer's own thread as the ticker hands it over."""
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(writer.executor, writer.write_partials, rows) is True


async def reread(generation: Generation) -> Generation:
    return await Generation.objects.select_related("message").aget(pk=generation.pk)


async def test_a_batch_writes_each_running_answers_sent_text_and_seq(alice: Any) -> None:
    first = await streaming(alice)
    second = await streaming(alice, content="flushed before")
    await write(
        [
            row(first, 3, ("Hello", "hm", [CALL]), upstream_id="gen-1", ttft_ms=80),
            row(second, 5),  # nothing new sent: only its heartbeat and seq
        ]
    )
    one, two = await reread(first), await reread(second)
    assert (one.message.content, one.message.reasoning, one.message.tool_calls) == (
        "Hello",
        "hm",
        [CALL],
    )
    assert (one.last_seq, one.upstream_id, one.ttft_ms) == (3, "gen-1", 80)
    assert (two.message.content, two.last_seq, two.upstream_id, two.ttft_ms) == (
        "flushed before",
        5,
        "",
        None,
    )
    for generation in (one, two):
        assert generation.status == "streaming"
        assert generation.heartbeat_at is not None


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (Status.COMPLETED, None),
        (Status.CANCELLED, None),
        (Status.FAILED, ErrorInfo(503, 503, "provider_unavailable", "provider became unavailable")),
    ],
)
async def test_a_late_batch_never_overwrites_the_final_state(
    alice: Any, status: Status, error: ErrorInfo | None
) -> None:
    generation = await streaming(alice)
    state = LiveState()
    state.apply(TextDelta("The final answer."))
    state.take_delta()
    completion = Completion(outcome="complete", generation_id="gen-1")
    await save_final(generation.pk, state, JobEnd(status, error, completion=completion), 120, None)
    final = await reread(generation)
    # A batch taken before the final write lands after it (the writer thread was busy).
    await write([row(generation, 0, ("The fin", "late", [CALL]), upstream_id="x", ttft_ms=999)])
    after = await reread(generation)
    assert after.status == status
    assert after.message.content == "The final answer."
    assert after.message.reasoning == ""
    assert after.message.tool_calls == []
    assert (after.last_seq, after.upstream_id, after.ttft_ms) == (1, "gen-1", 120)
    assert after.heartbeat_at == final.heartbeat_at
