"""An MCP tool's call in the app's tool loop, end to end: the emulator (a model over loopback)
calls a tool of the real test MCP server, the worker runs it, the pane hears its progress and
end, the next round answers from its result; Stop during the slow tool; an image result on the
answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from chatapp.streaming import stopping, worker
from chatapp.tools.mcp import catalog
from chatapp.tools.models import McpServer
from tests.chatapp.conftest import GroupListener, start_turn
from tests.chatapp.tools.test_tool_loop import (
    conversation_with,
    run_loop,
    turn_generations,
    workers_done,
)
from tests.mcp_server.running import RunningServer, serve
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RunningServer]:
    with serve() as running:
        yield running


@pytest.fixture
async def connected(mcp_server: RunningServer) -> McpServer:
    server = await McpServer.objects.acreate(name="Test tools", prefix="test", url=mcp_server.url)
    assert await catalog.refresh(server.pk) == ""
    return server


async def test_the_model_calls_an_mcp_tool_and_answers_from_its_result(
    alice: Any, connected: McpServer
) -> None:
    first, second = await run_loop(
        alice, "Please use test__lookup on trams", "emulator/tools", "test__lookup", "calculator"
    )
    [call] = first.message.tool_calls
    assert call["name"] == "test__lookup"
    assert call["status"] == "done"
    assert "lookup-result-42" in call["result"]
    assert isinstance(call["duration_ms"], int)
    assert "lookup-result-42" in second.message.content
    assert second.status == "completed"


async def test_the_failing_tool_s_error_reaches_the_model(alice: Any, connected: McpServer) -> None:
    first, second = await run_loop(alice, "use test__fail", "emulator/tools", "test__fail")
    [call] = first.message.tool_calls
    assert call["status"] == "error"
    assert "the test tool failed on purpose" in call["result"]
    assert call["result"] in second.message.content


async def test_an_image_result_is_on_the_answer_as_a_checked_image(
    alice: Any, connected: McpServer
) -> None:
    first, _ = await run_loop(alice, "use test__picture", "emulator/tools", "test__picture")
    [call] = first.message.tool_calls
    assert call["status"] == "done"
    [image] = first.message.attachments
    assert image["kind"] == "image"
    assert image["media_type"] == "image/png"


async def test_progress_is_in_the_pane_and_stop_cancels_the_call_on_the_server(
    alice: Any, connected: McpServer, mcp_server: RunningServer
) -> None:
    cancelled_before = mcp_server.lines.count("slow: cancelled")
    conversation = await conversation_with(alice, "test__slow")
    started = await start_turn(alice, "use test__slow", "emulator/tools", conversation.pk)
    listener = await GroupListener(conversation.pk).join()
    task = worker.start(started.job)
    delta = await listener.until("delta")
    while "step" not in str((delta.get("tool_runs") or [{}])[0].get("status_text")):
        delta = await listener.until("delta", within=10)
    run = delta["tool_runs"][0]
    assert run["status"] == "running"
    assert run["status_text"].startswith("running… · step ")
    await stopping.stop_turn(alice, started.job.generation_pk)
    done = await listener.until("done", within=3)
    assert "next" not in done
    await asyncio.wait_for(task, 10)
    await workers_done()
    [only] = await turn_generations(conversation)
    assert [c["status"] for c in only.message.tool_calls] == ["cancelled"]
    await eventually(
        lambda: mcp_server.lines.count("slow: cancelled") > cancelled_before,
        what="notifications/cancelled to reach the server",
    )


async def test_a_tool_of_a_server_with_a_problem_is_not_offered(
    alice: Any, connected: McpServer
) -> None:
    await McpServer.objects.filter(pk=connected.pk).aupdate(problem="it answered HTTP 500")
    [only] = await run_loop(alice, "use test__lookup", "emulator/tools", "test__lookup")
    [call] = only.message.tool_calls
    assert call["name"] == "get_weather"  # no tools were offered: the emulator's demo tool


async def test_a_slow_mcp_call_holds_up_no_one_else_s_answer(
    alice: Any, bob: Any, connected: McpServer, mcp_server: RunningServer
) -> None:
    started_before = mcp_server.lines.count("slow: started")
    conversation = await conversation_with(alice, "test__slow")
    slow = await start_turn(alice, "use test__slow", "emulator/tools", conversation.pk)
    slow_task = worker.start(slow.job)
    await eventually(
        lambda: mcp_server.lines.count("slow: started") > started_before,
        what="alice's slow call to start",
    )
    # Bob's answer streams and ends while alice's call still runs on the same event loop.
    other = await start_turn(bob, "hello there", "emulator/echo")
    await asyncio.wait_for(worker.start(other.job), 10)
    [answer] = await turn_generations(other.conversation)
    assert answer.status == "completed"
    assert not slow_task.done()
    await stopping.stop_turn(alice, slow.job.generation_pk)
    await asyncio.wait_for(slow_task, 10)
    await workers_done()
