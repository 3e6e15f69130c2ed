"""The built-in tools a model may call, and running one call safely.

`registry` is every built-in tool by name; `offered` narrows a conversation's choice, among them
and the tools of the MCP servers the user may use (`chatapp.tools.mcp.catalog`), to what an admin
has not switched off (`ToolSwitch`), what the user's groups allow (`access.group_policies`) and what
can run now; `upstream_tools` is the request's `tools` field, in the OpenAI function-tool shape
every gateway takes (the gateway docs stream calls back as `delta.tool_calls[].function`).
`run_call` is the one way a call runs, and it never raises:
whatever is wrong (an unknown tool, arguments that are not a JSON object or break the schema, a
tool's own failure, a crash) is an `error` run whose text tells the model what to fix, because the
model, not the user, is the one who can act on it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import orjson

from chatapp import request_memo, shared_cache
from chatapp.access.group_policies import access_for
from chatapp.tools import calculator, clock, schema_check
from chatapp.tools.base import RunStatus, Tool, ToolContext, ToolFailure, ToolRun
from chatapp.tools.models import ToolSwitch

__all__ = [
    "MAX_RESULT",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolRun",
    "add_built_in",
    "capped",
    "checked_call",
    "choosable",
    "offered",
    "pretty_arguments",
    "registry",
    "run_call",
    "upstream_tools",
]

logger = logging.getLogger(__name__)

MAX_RESULT = 16_000
"""Characters of a result the model is sent; the rest is cut, and the model told so."""

_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}

# The built-in tools, in the order the Tools control lists them. A tool that reads what a package
# above this one keeps is added by the app as it starts (`add_built_in`, from `apps.py`): the
# conversations' search.
_BUILT_IN: list[Tool] = [calculator.TOOL, clock.TOOL]


def add_built_in(tool: Tool) -> None:
    """Offer `tool` as a built-in, after those already there (once, however often it is added)."""
    if all(known.name != tool.name for known in _BUILT_IN):
        _BUILT_IN.append(tool)


def registry() -> dict[str, Tool]:
    """Every built-in tool by name, in the order the Tools control lists them."""
    return {tool.name: tool for tool in _BUILT_IN}


def offered(names: Iterable[str], user_pk: int | None) -> list[Tool]:
    """The tools among `names` that may be offered to user `user_pk`: built-in, or of an MCP
    server they may use that can be asked now; but those an admin switched off and those their
    groups' policies leave out (None: no user in particular; only what builds no request passes
    None). Reads the database."""
    from chatapp.tools.mcp import catalog  # its models import this package's base

    chosen = set(names)
    off = set(ToolSwitch.objects.filter(enabled=False).values_list("name", flat=True))
    access = access_for(user_pk)
    every: dict[str, Tool] = registry()
    if any(catalog.SEPARATOR in name for name in chosen):
        every |= {tool.name: tool for tool in catalog.usable_tools(user_pk)}
    return [
        tool
        for name, tool in every.items()
        if name in chosen and name not in off and access.allows_tool(name)
    ]


def choosable(user_pk: int | None) -> list[Tool]:
    """Every tool user `user_pk` may choose in Settings → Tools: the built-ins and the tools of
    the MCP servers they may use, but those an admin switched off and those their groups leave
    out. An MCP tool whose server has a problem is among them (`McpTool.problem` says it), so an
    outage does not drop it from a user's choice; `offered` leaves it out of requests until the
    server is back. Kept until a switch, a server or a policy changes (`shared_cache`), and once
    per request (`request_memo`): a new chat's page asks twice."""
    key = ("choosable", user_pk)
    found = request_memo.remember(
        key, lambda: shared_cache.cached(key, lambda: _choosable(user_pk))
    )
    return list(found)


def _choosable(user_pk: int | None) -> list[Tool]:
    from chatapp.tools.mcp import catalog

    off = set(ToolSwitch.objects.filter(enabled=False).values_list("name", flat=True))
    access = access_for(user_pk)
    every: list[Tool] = [*registry().values(), *catalog.all_tools(user_pk)]
    return [tool for tool in every if tool.name not in off and access.allows_tool(tool.name)]


def upstream_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The request's `tools` field for `tools`."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def run_call(
    name: str, arguments: str, context: ToolContext, offered_names: Collection[str]
) -> ToolRun:
    """Run the model's call of `name` with `arguments` (its JSON text) for `context`, if `name` is
    among `offered_names`. Never raises: every failure is an `error` run saying what went wrong."""
    started = time.monotonic()
    status: RunStatus
    try:
        result = _run(name, arguments, context, offered_names)
        status = "done"
    except ToolFailure as failure:
        result, status = str(failure), "error"
    except Exception:
        logger.exception("Tool %r failed on arguments %r", name, arguments[:200])
        result = f"The tool {name} failed (an internal error). Answer without it."
        status = "error"
    duration_ms = round((time.monotonic() - started) * 1000)
    return ToolRun(status=status, result=capped(result), duration_ms=duration_ms)


def pretty_arguments(arguments: str) -> tuple[str, bool]:
    """`arguments` indented, and True, when they are a JSON object; as sent, and False, when not
    (so the call can be shown flagged)."""
    try:
        parsed = _object(arguments)
    except ToolFailure:
        return arguments, False
    return orjson.dumps(parsed, option=orjson.OPT_INDENT_2).decode(), True


def _run(name: str, arguments: str, context: ToolContext, offered_names: Collection[str]) -> str:
    tool, parsed = checked_call(name, arguments, offered_names, registry())
    return tool.run(parsed, context)


def checked_call(
    name: str, arguments: str, offered_names: Collection[str], known: Mapping[str, Tool]
) -> tuple[Tool, dict[str, Any]]:
    """The tool `name` among `known` and the call's arguments as an object that matches its
    schema, if the request offered it; `ToolFailure` saying what to fix when not."""
    tool = known.get(name)
    if tool is None or name not in offered_names:
        available = ", ".join(sorted(offered_names)) or "none"
        raise ToolFailure(
            f"There is no tool named {name[:64]!r} here. The tools offered: {available}."
        )
    parsed = _object(arguments)
    error = schema_check.first_error(tool.parameters, parsed)
    if error is not None:
        where = f" at {error.json_path}" if error.path else ""
        raise ToolFailure(
            f"The arguments do not match the parameters of {name}{where}: {error.message[:300]}."
        )
    return tool, parsed


def _object(arguments: str) -> dict[str, Any]:
    """The arguments as a JSON object (empty text is `{}`); `ToolFailure` saying why not."""
    if not arguments.strip():
        return {}
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError as exc:
        raise ToolFailure(
            f"The arguments are not valid JSON ({exc}). Send one JSON object, e.g. {{}}."
        ) from None
    if not isinstance(parsed, dict):
        raise ToolFailure(f"The arguments must be a JSON object, not {_JSON_KINDS[type(parsed)]}.")
    return parsed


def capped(result: str) -> str:
    """`result` cut at `MAX_RESULT` characters, saying so."""
    if len(result) <= MAX_RESULT:
        return result
    return (
        result[:MAX_RESULT]
        + f"\n[Cut: the result was {len(result):,} characters; these are the first {MAX_RESULT:,}.]"
    )
