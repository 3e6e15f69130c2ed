"""The tool-calling loop against the real emulator over loopback: rounds, results sent back,
Stop at every step, the round limit, and bad arguments from the model."""

from __future__ import annotations

import asyncio
import threading
from decimal import Decimal
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib import admin
from django.urls import reverse

from chatapp import records_thread, tools
from chatapp.conversations import presentation
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.admin.generations import GenerationAdmin
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.gateways.models import Gateway
from chatapp.messaging import socket_messages
from chatapp.streaming import stopping, tool_loop, worker
from chatapp.tools.base import ToolContext
from gateway_client.accumulator import ToolCall
from gateway_client.emulator import EmulatorURL
from tests.chatapp.conftest import GroupListener, UpstreamLog, start_turn
from tests.chatapp.ws.test_consumers import connect, receive, socket
from tests.emulator_requests import record_chat_bodies
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def received(emulator_url: EmulatorURL, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    return record_chat_bodies(emulator_url.app, monkeypatch)


async def conversation_with(user: Any, *names: str) -> Conversation:
    return await Conversation.objects.acreate(user=user, tools=list(names))


async def turn_generations(conversation: Conversation) -> list[Generation]:
    """The conversation's generations, oldest first, once none is still streaming."""

    async def ended() -> list[Generation] | None:
        rows = [
            g
            async for g in Generation.objects.filter(conversation=conversation)
            .select_related("message")
            .order_by("pk")
        ]
        return rows if rows and all(not g.is_running for g in rows) else None

    return await eventually(ended, what="the turn's rounds to end", within=30)


async def workers_done() -> None:
    """Every worker has ended, the rounds each started included."""
    while worker._tasks:
        await asyncio.wait_for(asyncio.wait(list(worker._tasks)), 30)


async def run_loop(user: Any, text: str, model: str, *names: str) -> list[Generation]:
    conversation = await conversation_with(user, *names)
    started = await start_turn(user, text, model, conversation.pk)
    worker.start(started.job)
    await workers_done()
    return await turn_generations(conversation)


async def test_a_tool_call_runs_and_the_next_round_answers_from_its_result(
    alice: Any, upstream: UpstreamLog, received: list[dict[str, Any]]
) -> None:
    first, second = await run_loop(
        alice, "What is six times seven?", "emulator/tools", "calculator"
    )
    assert first.finish_reason == "tool_calls"
    assert (first.tool_round, second.tool_round) == (1, 2)
    [call] = first.message.tool_calls
    assert call["name"] == "calculator"
    assert call["status"] in ("done", "error")
    assert call["result"]
    assert isinstance(call["duration_ms"], int)
    # The next round continues the same answer: after the first, from its result.
    assert second.message.parent_id == first.message.pk
    assert call["result"] in second.message.content
    assert second.status == "completed"
    conversation = await Conversation.objects.aget(pk=first.conversation_id)
    assert conversation.current_leaf_id == second.message.pk
    # What the gateway was sent: the tools, then the call and its result in OpenAI's form.
    assert [t["function"]["name"] for t in received[0]["tools"]] == ["calculator"]
    assert received[0]["tools"][0]["function"]["parameters"]["type"] == "object"
    later = received[1]["messages"]
    assert later[-2]["role"] == "assistant"
    assert later[-2]["tool_calls"] == [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": "calculator", "arguments": call["arguments"]},
        }
    ]
    assert later[-1] == {"role": "tool", "tool_call_id": call["id"], "content": call["result"]}
    # Each round is its own generation with its own cost on record.
    for generation in (first, second):
        assert generation.upstream_id
        assert generation.cost_source == Generation.CostSource.STREAM
        assert generation.cost is not None
        assert generation.cost > Decimal(0)
    assert first.upstream_id != second.upstream_id
    # The ledger says which round each is.
    ledger = GenerationAdmin(Generation, admin.site)
    assert ledger.what(first) == f"Answer #{first.message.pk}"
    assert ledger.what(second) == f"Answer #{second.message.pk}, tool round 2"


async def test_parallel_calls_all_run_and_each_result_goes_back(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    model = "emulator/tools?calls=2"
    first, second = await run_loop(alice, "6*7 and the time", model, "calculator", "current_time")
    calls = first.message.tool_calls
    assert [(c["index"], c["name"], c["status"]) for c in calls] == [
        (0, "calculator", "done"),
        (1, "current_time", "done"),
    ]
    assert '"result":"42"' in calls[0]["result"]
    assert '"time_zone":' in calls[1]["result"]
    sent = received[1]["messages"]
    assert [c["id"] for c in sent[-3]["tool_calls"]] == [c["id"] for c in calls]
    assert [(m["role"], m["tool_call_id"]) for m in sent[-2:]] == [
        ("tool", calls[0]["id"]),
        ("tool", calls[1]["id"]),
    ]
    for call in calls:  # the answer quotes every result of the round
        assert call["result"] in second.message.content


async def test_arguments_that_are_not_json_are_an_error_result_the_model_reads(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    first, second = await run_loop(alice, "6*7", "emulator/tools?args=invalid", "calculator")
    [call] = first.message.tool_calls
    assert call["status"] == "error"
    assert "not valid JSON" in call["result"]
    assert received[1]["messages"][-1]["content"] == call["result"]
    assert second.status == "completed"
    assert call["result"] in second.message.content


async def test_calls_are_run_when_the_finish_says_stop(alice: Any) -> None:
    """Some endpoints report `stop` instead of `tool_calls` (the Numes docs)."""
    first, second = await run_loop(alice, "6*7", "emulator/tools?finish=stop", "calculator")
    assert first.finish_reason == "stop"
    assert [c["status"] for c in first.message.tool_calls] == ["done"]
    assert second.tool_round == 2


async def test_without_tools_offered_a_call_is_shown_but_not_run(alice: Any) -> None:
    [only] = await run_loop(alice, "Weather in Oslo?", "emulator/tools")
    [call] = only.message.tool_calls
    assert call["name"] == "get_weather"
    assert "status" not in call


async def test_a_follow_up_sends_the_earlier_calls_and_results_back(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    first, _ = await run_loop(alice, "six times seven", "emulator/tools", "calculator")
    started = await start_turn(alice, "thanks", "emulator/echo", first.conversation_id)
    worker.start(started.job)
    await workers_done()
    roles = [m["role"] for m in received[-1]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]


async def test_the_round_limit_ends_a_runaway_loop_in_words(
    alice: Any, settings: Any, upstream: UpstreamLog
) -> None:
    settings.CHAT_TOOL_ROUNDS = 3
    rounds = await run_loop(alice, "again and again", "emulator/tools?rounds=99", "calculator")
    # Three rounds of calls run; the fourth round's calls (the model asking again) do not.
    assert [g.tool_round for g in rounds] == [1, 2, 3, 4]
    last = rounds[-1]
    assert [c["status"] for c in last.message.tool_calls] == ["not_run"]
    reason = "Not run: this answer already ran 3 rounds of tool calls, the app's limit."
    assert last.message.tool_calls[0]["result"] == reason
    note = await sync_to_async(presentation.finish_note)(last)
    assert note is not None
    assert note.text == f"The turn stopped here. {reason}"
    assert all(c["status"] in ("done", "error") for g in rounds[:-1] for c in g.message.tool_calls)


class BlockingTool:
    """A tool that runs until the test lets it go: Stop must not wait for it."""

    name = "wait_for_test"
    title = "Wait"
    description = "Waits."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.started.set()
        self.release.wait(10)
        return "finished"


@pytest.fixture
def blocking_tool(monkeypatch: pytest.MonkeyPatch) -> Any:
    tool = BlockingTool()
    built_in = tools.registry()
    monkeypatch.setattr(tools, "registry", lambda: {**built_in, tool.name: tool})
    yield tool
    tool.release.set()


async def test_stop_while_a_tool_runs_stops_the_turn(alice: Any, blocking_tool: Any) -> None:
    conversation = await conversation_with(alice, blocking_tool.name)
    started = await start_turn(alice, "wait", "emulator/tools", conversation.pk)
    listener = await GroupListener(conversation.pk).join()
    task = worker.start(started.job)
    await asyncio.to_thread(blocking_tool.started.wait, 10)
    running = await listener.until("delta")
    while not running.get("tool_runs"):
        running = await listener.until("delta")
    assert running["tool_runs"][0]["status"] == "running"
    await stopping.stop_turn(alice, started.job.generation_pk)
    done = await listener.until("done", within=3)
    assert "next" not in done
    await asyncio.wait_for(task, 10)
    await workers_done()
    [only] = await turn_generations(conversation)
    assert only.status == "completed"  # its stream had ended: the request itself completed
    assert [c["status"] for c in only.message.tool_calls] == ["cancelled"]


async def test_stop_during_a_later_round_closes_its_upstream_request(
    alice: Any, upstream: UpstreamLog
) -> None:
    conversation = await conversation_with(alice, "calculator")
    model = "emulator/tools?rounds=2&tokens_per_second=20"
    started = await start_turn(alice, "six times seven", model, conversation.pk)
    listener = await GroupListener(conversation.pk).join()
    worker.start(started.job)
    done = await listener.until("done")
    assert done["g"] == started.job.generation_pk
    assert done["next"]
    second = await Generation.objects.filter(conversation=conversation, tool_round=2).aget()
    await listener.until("delta")
    # Stop names the round the page showed running: the turn's current round stops.
    await stopping.stop_turn(alice, started.job.generation_pk)
    while (done := await listener.until("done", within=3))["g"] != second.pk:
        pass
    assert done["status"] == "cancelled"
    assert "next" not in done
    await workers_done()
    rounds = await turn_generations(conversation)
    assert [g.tool_round for g in rounds] == [1, 2]
    record = await upstream.settled(rounds[1].upstream_id)
    assert record.final_outcome == "cancelled"


async def test_a_stop_sent_before_the_next_round_runs_is_kept_for_it(alice: Any) -> None:
    """The cancel reaches the process between the next round's rows and its worker."""
    started = await start_turn(alice, "hi", "emulator/echo")
    ticker = worker.current_ticker()
    await get_channel_layer().send(
        ticker.channel, socket_messages.cancel(started.job.generation_pk)
    )
    await eventually(
        lambda: started.job.generation_pk in ticker._early_cancels, what="the cancel to arrive"
    )
    late = worker.GenerationWorker(started.job, ticker)
    ticker.add(late)
    try:
        assert late._cancel.is_set()
    finally:
        ticker.remove(late)


async def test_stop_is_refused_for_another_users_answer(alice: Any, bob: Any) -> None:
    started = await start_turn(alice, "hi", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    assert not await stopping.stop_turn(bob, started.job.generation_pk)
    assert await stopping.stop_turn(alice, started.job.generation_pk)


async def test_read_aloud_does_not_hold_up_the_next_turn(alice: Any) -> None:
    started = await start_turn(alice, "hi", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    await Generation.objects.acreate(
        conversation_id=started.conversation.pk,
        kind=Generation.Kind.READ_ALOUD,
        read_aloud_id=started.assistant.pk,
        model="emulator/audio",
    )
    follow_up = await start_turn(alice, "again", "emulator/echo", started.conversation.pk)
    await asyncio.wait_for(worker.start(follow_up.job), 30)
    assert (
        await sync_to_async(Message.objects.filter(conversation=started.conversation).count)() == 4
    )


async def test_a_round_that_cannot_continue_still_keeps_its_answer(
    alice: Any, blocking_tool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The gateway is turned off while the tools run: the next round cannot start, and the
    answer that called them is written whole all the same."""
    conversation = await conversation_with(alice, blocking_tool.name)
    started = await start_turn(alice, "wait", "emulator/tools", conversation.pk)
    worker.start(started.job)
    await asyncio.to_thread(blocking_tool.started.wait, 10)
    await Gateway.objects.filter(pk=started.generation.gateway_id).aupdate(enabled=False)
    configs.forget_configs()
    blocking_tool.release.set()
    await workers_done()
    [only] = await turn_generations(conversation)
    assert only.status == "completed"
    assert [c["status"] for c in only.message.tool_calls] == ["done"]
    assert only.message.tool_calls[0]["result"] == "finished"
    assert "its next tool round could not start" in caplog.text


async def test_a_page_that_missed_a_rounds_end_learns_of_the_next_round(alice: Any) -> None:
    """Its socket was down when round 1 ended: asking after round 1 says where round 2 is."""
    [first, second] = await run_loop(alice, "6*7?", "emulator/tools", "calculator")
    ws = await socket(first.conversation_id, alice)
    await connect(ws)
    try:
        await ws.send_to(text_data=orjson.dumps({"t": "snapshot", "g": first.pk}).decode())
        done = await receive(ws)
        assert done["t"] == "done"
        assert done["g"] == first.pk
        assert done["next"] == reverse("chat:message", args=[second.message.pk])
        await ws.send_to(text_data=orjson.dumps({"t": "snapshot", "g": second.pk}).decode())
        assert "next" not in await receive(ws)
    finally:
        await ws.disconnect()


async def test_a_stop_while_a_round_is_written_keeps_the_next_round_from_running(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    """The Stop lands while round 1's final write waits for the records thread: round 2 is on
    record by then, and must not ask the gateway anything."""
    conversation = await conversation_with(alice, "calculator")
    started = await start_turn(alice, "6*7", "emulator/tools", conversation.pk)
    listener = await GroupListener(conversation.pk).join()
    held = threading.Event()
    holding = asyncio.ensure_future(records_thread.on_record_thread(held.wait, 10))
    worker.start(started.job)
    ran = False
    while not ran:  # the call has run: round 1's final write is next
        delta = await listener.until("delta")
        ran = any(run["status"] == "done" for run in delta.get("tool_runs", []))
    # Round 1's final write is queued behind the held thread: the turn was going on when it left.
    await eventually(
        lambda: records_thread.records.queued() > 0, what="round 1's final write queued"
    )
    await stopping.stop_turn(alice, started.job.generation_pk)
    held.set()
    await holding
    await workers_done()
    first, second = await turn_generations(conversation)
    assert first.status == "completed"
    assert second.status == "cancelled"
    assert second.upstream_id == ""
    assert len(received) == 1, "the gateway was asked for round 1 only"


def test_made_up_call_ids_differ_between_rounds() -> None:
    call = ToolCall(0, None, "calculator", "{}")
    assert tool_loop.call_id(call, 7) != tool_loop.call_id(call, 8)
    assert tool_loop.call_id(ToolCall(0, "call_x", "calculator", "{}"), 7) == "call_x"
