"""Running a model's call of an MCP tool, in the tool loop as a built-in's call runs
(`streaming.tool_loop.run_calls`): the arguments checked against the tool's schema first, then one
session on this event loop under `CHAT_MCP_TIMEOUT`, the server's progress passed to the pane, and
the result (or the server's error) read for the model (`results.read`).

Stop cancels the task running the call. The SDK (1.30) does not tell the server when a request's
task is cancelled, so this module does: `notifications/cancelled` for the request, sent shielded
and bounded before the session closes; a call past its deadline is cancelled the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from mcp import McpError, types

from chatapp import tools
from chatapp.gateways import key_vault
from chatapp.tools.base import RunStatus, ToolFailure
from chatapp.tools.mcp import catalog, client, results
from chatapp.tools.models import McpServer

__all__ = ["McpRun", "is_mcp", "run"]

logger = logging.getLogger(__name__)

type Progress = Callable[[str], Awaitable[None]]

PROGRESS_EVERY = 0.25
"""Seconds between two progress updates passed on; those between are dropped."""

_refreshes: set[asyncio.Task[str]] = set()  # listings asked for by list_changed, until done


@dataclass(frozen=True, slots=True)
class McpRun:
    """A call's run: as `ToolRun`, with the attachments its result brought."""

    status: RunStatus
    result: str
    duration_ms: int
    attachments: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class _Prepared:
    tool: catalog.McpTool
    arguments: dict[str, Any]
    access: client.ServerAccess


def is_mcp(name: str | None) -> bool:
    """Whether a call's name is an MCP tool's (built-in names have no `__`)."""
    return bool(name) and catalog.SEPARATOR in (name or "")


def _prepare(name: str, arguments: str, offered: Collection[str], user_pk: int) -> _Prepared:
    """The tool, its arguments checked, and its server's access; `ToolFailure` saying why not.
    Reads the database: runs on a thread."""
    try:
        tool = next((t for t in catalog.all_tools(user_pk) if t.name == name), None)
        if tool is not None and tool.problem and name in offered:
            raise ToolFailure(
                f"The tool {name} is unavailable: its server {tool.server_name} has a problem "
                f"({tool.problem}). Answer without it."
            )
        known = {tool.name: tool} if tool is not None else {}
        checked_tool, parsed = tools.checked_call(name, arguments, offered, known)
        assert isinstance(checked_tool, catalog.McpTool)
        server = McpServer.objects.get(pk=checked_tool.server_pk)
        try:
            access = catalog.access_for(server)
        except key_vault.KeyUnavailable as exc:
            raise ToolFailure(f"The tool {name} is unavailable: {exc}.") from None
        return _Prepared(checked_tool, parsed, access)
    finally:
        connections.close_all()


def _list_changed(server_pk: int) -> client.ListChanged:
    async def changed() -> None:
        task = asyncio.get_running_loop().create_task(catalog.refresh(server_pk))
        _refreshes.add(task)
        task.add_done_callback(_refreshes.discard)

    return changed


async def _cancel_on_server(session: Any, request_id: int, reason: str) -> None:
    """Tell the server its request is cancelled, whatever is cancelling us (bounded: 2 s)."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(Exception):
        await session.send_notification(
            types.ClientNotification(
                types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
                )
            )
        )


async def _call(prepared: _Prepared, budget: client.Budget, shown: Progress) -> McpRun:
    """One session: initialize, `tools/call`, read the result. Raises what the session raises."""
    last = 0.0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_EVERY:
            return
        last = now
        said = (message or "").strip()[:80]
        counted = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        await shown(said or counted)

    access = prepared.access
    async with client.session(access, budget, _list_changed(access.pk)) as session:
        # The id `send_request` is about to give the call: read before it is sent.
        request_id = int(getattr(session, "_request_id", 0))
        request = types.ClientRequest(
            types.CallToolRequest(
                params=types.CallToolRequestParams(
                    name=prepared.tool.remote_name, arguments=prepared.arguments
                )
            )
        )
        # `send_request`, not `call_tool`: that one lists the tools again to check structured
        # output, a round trip per call, for output the app only ever treats as text.
        sent = session.send_request(request, types.CallToolResult, progress_callback=on_progress)
        try:
            answer = await client.raced(sent, budget)
        except asyncio.CancelledError:  # Stop, or the deadline
            await _cancel_on_server(session, request_id, "The call was stopped.")
            raise
        except client.TooLarge:
            await _cancel_on_server(session, request_id, "The answer was too large.")
            raise
    read = results.read(answer, prepared.tool.remote_name)
    status: RunStatus = "error" if read.failed else "done"
    return McpRun(status, read.text, 0, read.attachments)


async def run(
    name: str, arguments: str, offered: Collection[str], user_pk: int, progress: Progress
) -> McpRun:
    """Run the model's call of the MCP tool `name`. Never raises but on cancellation (Stop):
    every failure is an `error` run whose text says what went wrong, for the model."""
    started = time.monotonic()
    timeout = settings.CHAT_MCP_TIMEOUT

    def ran(status: RunStatus, text: str, attachments: tuple[dict[str, Any], ...] = ()) -> McpRun:
        ms = round((time.monotonic() - started) * 1000)
        return McpRun(status, tools.capped(text), ms, attachments)

    try:
        prepared = await sync_to_async(_prepare, thread_sensitive=False)(
            name, arguments, offered, user_pk
        )
    except ToolFailure as failure:
        return ran("error", str(failure))
    budget = client.Budget(settings.CHAT_MCP_MAX_BYTES)
    server = prepared.access.name
    try:
        async with asyncio.timeout(timeout):
            outcome = await _call(prepared, budget, progress)
    except TimeoutError:
        logger.warning("MCP tool %s took longer than %s s", name, timeout)
        return ran("error", f"The tool took longer than {timeout:g} s and was cancelled.")
    except McpError as exc:  # the server's JSON-RPC error: the tool's, for the model
        return ran("error", f"The server {server} answered with an error: {exc.error.message}")
    except Exception as exc:
        problem = client.reason(exc, budget)
        logger.warning("MCP tool %s failed: %s", name, problem)
        if not budget.spent_out:
            await catalog.mark_unreachable(prepared.access.pk, problem)
        return ran("error", f"The tool could not be run: the server {server} {problem}.")
    return ran(outcome.status, outcome.result, outcome.attachments)
