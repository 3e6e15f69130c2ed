"""Which MCP tools exist and who may call them: each server's `tools/list`, checked, bounded and
kept on its row (`McpServer.tools`), read back as `McpTool`s the tool registry offers beside the
built-ins.

A listing is refreshed on a schedule (`refresh_due`, from each process's sweep: a server with a
problem sooner, so one that comes back is soon usable again), on demand in the admin, and when a
server says `notifications/tools/list_changed` during a call. Between listings nothing asks the
server: a page or a request reads the row. A tool whose name, description or schema is out of
bounds is left out with the reason kept (`McpServer.problem` says how many); a server that cannot
be listed keeps its last tools on the row, shown but not offered, with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from mcp import types

from chatapp import shared_cache
from chatapp.gateways import key_vault
from chatapp.tools import schema_check
from chatapp.tools.base import ToolContext, ToolFailure
from chatapp.tools.mcp import client
from chatapp.tools.models import McpServer

__all__ = [
    "McpTool",
    "access_for",
    "listed",
    "refresh",
    "refresh_all",
    "refresh_due",
    "server_problem",
    "server_tools",
    "toolless_problems",
    "usable_tools",
]

logger = logging.getLogger(__name__)

MAX_TOOLS = 128  # per server
MAX_PAGES = 8  # of `tools/list`
MAX_DESCRIPTION = 2_000
MAX_SCHEMA_BYTES = 32_768
MAX_SCHEMA_DEPTH = 12
SEPARATOR = "__"
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class McpTool:
    """A tool of an MCP server as the registry offers it (the `Tool` protocol): `name` is what
    the model calls (`prefix__tool`), `remote_name` what the server calls it. Its results are
    `private`: what a server returns for a user is not shown through a shared link."""

    name: str
    title: str
    about: str
    description: str
    parameters: dict[str, Any]
    server_pk: int
    server_name: str
    remote_name: str
    problem: str = ""  # why it is not offered ("" when it is)
    private: bool = True

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        raise ToolFailure("An MCP tool runs on the event loop (chatapp.tools.mcp.calls), not here.")


def _depth(value: Any, limit: int) -> int:
    """How deep `value` nests, counted no further than `limit` + 1."""
    if limit < 0:
        return 1
    if isinstance(value, dict):
        return 1 + max((_depth(v, limit - 1) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v, limit - 1) for v in value), default=0)
    return 0


def _remote_refs(value: Any) -> bool:
    """Whether a schema refers outside itself (a `$ref` not starting with `#`), which checking
    arguments would have to fetch."""
    if isinstance(value, dict):
        ref = value.get("$ref", "#")
        return not (isinstance(ref, str) and ref.startswith("#")) or any(
            _remote_refs(v) for v in value.values()
        )
    if isinstance(value, list):
        return any(_remote_refs(v) for v in value)
    return False


def _checked_schema(schema: Any) -> dict[str, Any]:
    """The tool's input schema, if it is one we can check arguments with cheaply: an object
    schema, valid Draft 2020-12, of bounded size and depth. `ValueError` saying why not."""
    if not isinstance(schema, dict):
        raise ValueError("its input schema is not an object")
    if len(orjson.dumps(schema)) > MAX_SCHEMA_BYTES:
        raise ValueError(f"its input schema is over {MAX_SCHEMA_BYTES:,} bytes")
    if _depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise ValueError(f"its input schema nests deeper than {MAX_SCHEMA_DEPTH}")
    if _remote_refs(schema):
        raise ValueError("its input schema refers to another document ($ref)")
    if schema.get("type", "object") != "object":
        raise ValueError("its input schema is not for an object")
    try:
        schema_check.check_schema(schema)
    except schema_check.SchemaError as exc:
        raise ValueError(f"its input schema is not valid ({exc.message[:120]})") from None
    return schema


def listed(tools: Iterable[types.Tool], prefix: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The tools of a `tools/list` as the row keeps them, and the reasons those left out were."""
    kept: list[dict[str, Any]] = []
    refused: list[str] = []
    for tool in tools:
        name = f"{prefix}{SEPARATOR}{tool.name}"
        if len(kept) >= MAX_TOOLS:
            refused.append(f"{tool.name[:64]}: past the first {MAX_TOOLS} tools")
            continue
        if not _NAME.match(name):
            refused.append(f"{tool.name[:64]!r}: its name does not fit a model's tool name")
            continue
        try:
            schema = _checked_schema(tool.inputSchema)
        except ValueError as exc:
            refused.append(f"{tool.name}: {exc}")
            continue
        description = (tool.description or "").strip()[:MAX_DESCRIPTION]
        title = (tool.title or (tool.annotations.title if tool.annotations else None) or "")[:100]
        kept.append(
            {
                "name": tool.name,
                "title": title.strip() or tool.name,
                "description": description,
                "input_schema": schema,
            }
        )
    return kept, refused


def _tool(server: McpServer, entry: dict[str, Any], problem: str) -> McpTool:
    description = str(entry.get("description", ""))
    about = description.split("\n", 1)[0][:200] or "A tool of this MCP server."
    return McpTool(
        name=f"{server.prefix}{SEPARATOR}{entry['name']}",
        title=str(entry.get("title") or entry["name"]),
        about=about,
        description=description or f"The tool {entry['name']} of {server.name}.",
        parameters=dict(entry.get("input_schema") or {"type": "object"}),
        server_pk=server.pk,
        server_name=server.name,
        remote_name=str(entry["name"]),
        problem=problem,
    )


def server_problem(server: McpServer) -> str:
    """Why `server`'s tools are not offered now ("" when they are)."""
    if server.problem:
        return server.problem
    if not server.enabled:
        return "the server is turned off"
    return "" if server.checked_at else "it has not been reached yet"


def server_tools(server: McpServer) -> list[McpTool]:
    """A server's listed tools, each with the server's problem (if any) as its own."""
    problem = server_problem(server)
    entries = server.tools if isinstance(server.tools, list) else []
    return [_tool(server, entry, problem) for entry in entries if isinstance(entry, dict)]


def _servers_for(user_pk: int | None) -> Any:
    servers = McpServer.objects.all()
    if user_pk is not None:
        servers = servers.filter(Q(groups__isnull=True) | Q(groups__user__pk=user_pk)).distinct()
    return servers


def all_tools(user_pk: int | None = None) -> list[McpTool]:
    """Every listed tool of the servers `user_pk` may use (None: of every server), available or
    not: what Settings → Tools and the tool switches list. Reads the database."""
    return [tool for server in _servers_for(user_pk) for tool in server_tools(server)]


def toolless_problems(user_pk: int | None) -> dict[str, str]:
    """The servers `user_pk` may use that list no tool and cannot be asked now (never reached,
    away or turned off), by name, with why: Settings → Tools names them, so that a server that
    never answered is said to be unavailable, not silently missing. Kept until a server or a
    group changes (`shared_cache`): every page with the Tools control asks."""
    found = shared_cache.cached(("toolless", user_pk), lambda: _toolless_problems(user_pk))
    return dict(found)


def _toolless_problems(user_pk: int | None) -> dict[str, str]:
    return {
        server.name: problem
        for server in _servers_for(user_pk)
        if not server_tools(server) and (problem := server_problem(server))
    }


def usable_tools(user_pk: int | None = None) -> list[McpTool]:
    """The tools of `all_tools` that may be offered now: their server is on and has no
    problem."""
    return [tool for tool in all_tools(user_pk) if not tool.problem]


# --- Listing ------------------------------------------------------------------------------------


def access_for(server: McpServer) -> client.ServerAccess:
    """What a session needs of `server`: its headers decrypted (`KeyUnavailable` if they
    cannot be)."""
    headers: dict[str, str] = {}
    if server.headers_encrypted:
        headers = orjson.loads(key_vault.decrypt(server.headers_encrypted))
    return client.ServerAccess(server.pk, server.name, server.url, server.transport, headers)


async def _list(access: client.ServerAccess) -> list[types.Tool]:
    budget = client.Budget(settings.CHAT_MCP_MAX_BYTES)
    tools: list[types.Tool] = []
    try:
        async with asyncio.timeout(settings.CHAT_MCP_CONNECT_TIMEOUT):
            async with client.session(access, budget) as session:
                cursor: str | None = None
                for _ in range(MAX_PAGES):
                    page = await client.raced(session.list_tools(cursor=cursor), budget)
                    tools.extend(page.tools)
                    cursor = page.nextCursor
                    if not cursor or len(tools) > MAX_TOOLS:
                        break
    except Exception as exc:
        raise client.Unreachable(client.reason(exc, budget)) from exc
    return tools


async def refresh(server_pk: int) -> str:
    """List server `server_pk`'s tools now and keep them on its row; the problem found ("" for
    none). Never raises for the server's sake: what went wrong is the row's `problem`."""
    server = await McpServer.objects.filter(pk=server_pk).afirst()
    if server is None:
        return "no such server"
    problem = ""
    try:
        access = await sync_to_async(access_for)(server)
        kept, refused = listed(await _list(access), server.prefix)
    except key_vault.KeyUnavailable as exc:
        problem = f"its headers cannot be read: {exc}"
    except client.Unreachable as exc:
        problem = str(exc)
    if problem:
        logger.warning("MCP server %s: %s", server.name, problem)
        await McpServer.objects.filter(pk=server_pk).aupdate(
            problem=problem[:300], checked_at=timezone.now()
        )
        await sync_to_async(shared_cache.changed)()  # an update sends no signal
        return problem
    if refused:
        logger.info("MCP server %s: tools left out: %s", server.name, "; ".join(refused)[:500])
    await McpServer.objects.filter(pk=server_pk).aupdate(
        tools=kept, problem="", checked_at=timezone.now()
    )
    await sync_to_async(shared_cache.changed)()  # an update sends no signal
    return ""


async def refresh_all(server_pks: list[int]) -> list[str]:
    """`refresh` each of `server_pks` side by side; their problems, in order."""
    return list(await asyncio.gather(*(refresh(pk) for pk in server_pks)))


async def mark_unreachable(server_pk: int, problem: str) -> None:
    """A call found the server away: its tools are not offered until a listing succeeds (which
    `refresh_due` tries again soon)."""
    await McpServer.objects.filter(pk=server_pk).aupdate(
        problem=problem[:300], checked_at=timezone.now()
    )
    await sync_to_async(shared_cache.changed)()  # an update sends no signal


async def refresh_due() -> None:
    """Refresh the listings that are due: every `CHAT_MCP_REFRESH_INTERVAL` seconds, or
    `CHAT_MCP_RETRY_INTERVAL` for a server with a problem. Each is claimed by moving its
    `checked_at` first, so that of several processes only one asks."""
    now = timezone.now()
    due = Q(checked_at__isnull=True) | Q(
        checked_at__lt=now - timedelta(seconds=settings.CHAT_MCP_REFRESH_INTERVAL)
    )
    due |= ~Q(problem="") & Q(
        checked_at__lt=now - timedelta(seconds=settings.CHAT_MCP_RETRY_INTERVAL)
    )
    claimed = []
    async for server in McpServer.objects.filter(due, enabled=True).only("pk", "checked_at"):
        if await McpServer.objects.filter(pk=server.pk, checked_at=server.checked_at).aupdate(
            checked_at=now
        ):
            claimed.append(server.pk)
    await refresh_all(claimed)


_refreshing: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}


async def _refresh_due_logged() -> None:
    try:
        await refresh_due()
    except Exception:
        logger.exception("Refreshing the MCP servers' tool lists failed")


def start_refresh_due() -> None:
    """Start `refresh_due` on this loop unless it is still running from the last sweep."""
    loop = asyncio.get_running_loop()
    task = _refreshing.get(loop)
    if task is None or task.done():
        _refreshing[loop] = loop.create_task(_refresh_due_logged())
