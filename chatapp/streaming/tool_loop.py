"""The steps of a turn that calls tools: which calls to run, running them, and what each run is to
browsers and to the database (the next round's context is read from what the database keeps, by
`conversations.tree.context_for`).

The gateways' rule (Numes, Osmexo; INDEX.md): parse arguments and run tools only after the finish
chunk, on `tool_calls`, and on `stop` too when calls accumulated ("some endpoints report stop
instead of tool_calls"). A call cut off by `length` is not run: its arguments are incomplete. The
calls of one round run side by side, each on the tools' own threads (a tool may read the
database), and each run's start and end reach the browsers at once. A call that cannot run
(arguments that are not JSON or break the schema, a tool turned off) becomes an error result the
model reads, never a crash (`chatapp.tools.run_call`).

The worker owns the loop itself: it runs a round's calls after its stream ends, and the final
write of the round starts the next generation when they all ran (`turns.create_tool_round`). So
the loop stands with the worker in `streaming`, above the tools it runs and the conversations it
continues; how a run reads in the pane is the tools' (`tools/call_view.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import connections

from chatapp import tools
from chatapp.conversations.jobs import Job, JobEnd, Status
from chatapp.conversations.models import ENDED, CallStatus
from chatapp.tools.base import ToolContext, ToolRun
from chatapp.tools.call_view import INVALID_ARGUMENTS, status_text
from chatapp.tools.mcp import calls as mcp_calls
from gateway_client.accumulator import ToolCall

logger = logging.getLogger(__name__)

RUN_FINISHES = frozenset({"tool_calls", "stop"})

# Tools read the database, so they run on threads of their own: never the event loop's, and not
# the records thread, which final writes must not wait behind.
_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="chat-tools")


@dataclass(frozen=True, slots=True)
class CallRun:
    """A call's run as the tool pane shows it: its arguments `pretty`-printed when they are a JSON
    object (`valid`), `result` the text the model is sent. The message keeps the run's status,
    result and duration beside the call as streamed (`stored_calls`); the pane's text is made
    from those again (`call_view.tool_call_view`)."""

    index: int
    call_id: str
    status: CallStatus
    pretty: str
    valid: bool
    result: str = ""
    duration_ms: int | None = None
    progress: str = ""  # while running: the server's last progress (MCP tools)
    # What the result brought for the user (an MCP tool's images and files), as
    # `Message.attachments` keeps them: added to the round's answer.
    attachments: tuple[dict[str, Any], ...] = ()

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def to_dict(self) -> dict[str, Any]:
        """What a browser is sent, the pane's words included (chat.js `applyToolRun`)."""
        return {
            "index": self.index,
            "id": self.call_id,
            "status": self.status,
            "status_text": status_text(self.status, self.duration_ms, self.progress),
            "pretty": self.pretty,
            "valid": self.valid,
            "flag": "" if self.valid else INVALID_ARGUMENTS,
            "result": self.result,
            "duration_ms": self.duration_ms,
        }


def calls_to_run(job: Job, end: JobEnd) -> list[ToolCall]:
    """The calls of a finished round that the app runs: none unless tools were offered and the
    stream completed with a finish that asks for them."""
    completion = end.completion
    if not job.tools or end.status != Status.COMPLETED or completion is None:
        return []
    if completion.finish_reason not in RUN_FINISHES:
        return []
    return list(completion.tool_calls)


def offered_names(job: Job) -> frozenset[str]:
    """The names of the tools the round's request offered (its upstream `tools`)."""
    return frozenset(str(tool["function"]["name"]) for tool in job.tools)


def call_id(call: ToolCall, generation_pk: int) -> str:
    """The call's ID as the model gave it; one made from its generation and index when the stream
    gave none, so the `tool` message can still name the call it answers (and no two calls of a
    turn share one)."""
    return call.id or f"call_{generation_pk}_{call.index}"


def _started(call: ToolCall, generation_pk: int) -> CallRun:
    pretty, valid = tools.pretty_arguments(call.arguments)
    return CallRun(call.index, call_id(call, generation_pk), "running", pretty, valid)


def not_run(calls: Iterable[ToolCall], generation_pk: int, reason: str) -> list[CallRun]:
    """The runs of calls that will not run (the round limit), each saying why."""
    return [
        replace(_started(call, generation_pk), status="not_run", result=reason) for call in calls
    ]


def failed(calls: Iterable[ToolCall], generation_pk: int) -> list[CallRun]:
    """The runs of calls the app failed to run (a crash of its own, logged)."""
    reason = "The app failed while running this tool; it did not run."
    return [replace(_started(call, generation_pk), status="error", result=reason) for call in calls]


def cancelled(runs: Iterable[CallRun]) -> list[CallRun]:
    """`runs` after the user stopped the turn: those not ended are cancelled."""
    reason = "The user stopped the answer before this tool call finished."
    return [run if run.ended else replace(run, status="cancelled", result=reason) for run in runs]


def _run_on_thread(call: ToolCall, context: ToolContext, offered: frozenset[str]) -> ToolRun:
    try:
        return tools.run_call(call.name or "", call.arguments, context, offered)
    finally:
        connections.close_all()  # this thread's connections, which nothing else would close


async def run_calls(
    calls: list[ToolCall],
    generation_pk: int,
    context: ToolContext,
    offered: frozenset[str],
    on_change: Callable[[CallRun], Awaitable[None]],
) -> list[CallRun]:
    """Run a round's calls side by side; `on_change` hears each start and end. A call still
    running after `CHAT_TOOL_TIMEOUT` is reported as failed (its thread cannot be stopped, and
    its late result is dropped); an MCP tool's call runs on this loop instead, cancelled with
    the turn or at its own deadline (`chatapp.tools.mcp.calls`)."""
    timeout = settings.CHAT_TOOL_TIMEOUT
    loop = asyncio.get_running_loop()
    runs = {call.index: _started(call, generation_pk) for call in calls}
    for run in runs.values():
        await on_change(run)

    async def one(call: ToolCall) -> None:
        started = runs[call.index]
        if mcp_calls.is_mcp(call.name):
            await _one_mcp(call, started)
            return
        future = loop.run_in_executor(_executor, _run_on_thread, call, context, offered)
        try:
            ran = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            logger.warning("Tool %s took longer than %s s", call.name, timeout)
            message = f"The tool took longer than {timeout:g} s and was abandoned."
            ran = ToolRun("error", message, round(timeout * 1000))
        runs[call.index] = replace(
            started, status=ran.status, result=ran.result, duration_ms=ran.duration_ms
        )
        await on_change(runs[call.index])

    async def _one_mcp(call: ToolCall, started: CallRun) -> None:
        """An MCP tool's call: on this loop, under its own deadline (`CHAT_MCP_TIMEOUT`)."""

        async def progress(text: str) -> None:
            if not runs[call.index].ended:
                runs[call.index] = replace(started, progress=text)
                await on_change(runs[call.index])

        ran = await mcp_calls.run(
            call.name or "", call.arguments, offered, context.user_pk, progress
        )
        runs[call.index] = replace(
            started,
            status=ran.status,
            result=ran.result,
            duration_ms=ran.duration_ms,
            attachments=ran.attachments,
        )
        await on_change(runs[call.index])

    await asyncio.gather(*(one(call) for call in calls))
    return [runs[call.index] for call in calls]


def stored_calls(
    calls: Iterable[Mapping[str, Any]], runs: Iterable[CallRun] | None
) -> list[dict[str, Any]]:
    """A message's `tool_calls` as stored: each call as streamed, with its run if it had one."""
    by_index = {run.index: run for run in runs or ()}
    stored = []
    for call in calls:
        run = by_index.get(call["index"])
        if run is None:
            stored.append(dict(call))
        else:
            stored.append(
                {
                    **call,
                    "id": run.call_id,
                    "status": run.status,
                    "result": run.result,
                    "duration_ms": run.duration_ms,
                }
            )
    return stored


def over_limit(tool_round: int) -> bool:
    """Whether a round's calls are past the limit: a turn runs `CHAT_TOOL_ROUNDS` rounds of calls,
    and the calls of the round after them (the model asking again) are not run."""
    return tool_round > settings.CHAT_TOOL_ROUNDS


def limit_reason() -> str:
    """Why calls past the limit were not run: the tool message the model reads and the note."""
    rounds = settings.CHAT_TOOL_ROUNDS
    return f"Not run: this answer already ran {rounds} rounds of tool calls, the app's limit."


def continues(runs: list[CallRun] | None, stopped: asyncio.Event) -> bool:
    """Whether the turn goes on to another round after `runs`: when every call ran, and the user
    has not stopped it."""
    ran = bool(runs) and all(run.status in ("done", "error") for run in runs or ())
    return ran and not stopped.is_set()
