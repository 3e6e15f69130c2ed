"""One tool call as its pane shows it (`_tool_call.html`, whose markup live_render.js clones for
a call still streaming): its status in words, its arguments laid out, and whether they are flagged.
The tool loop's runs (`streaming.tool_loop.CallRun`) say their status in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chatapp import tools

__all__ = ["INVALID_ARGUMENTS", "ToolCallView", "status_text", "tool_call_view"]

_STATUS_WORDS = {
    "running": "running…",
    "done": "done",
    "error": "error",
    "cancelled": "cancelled",
    "not_run": "not run",
}
INVALID_ARGUMENTS = "These arguments are not a JSON object."


def status_text(status: str, duration_ms: object, progress: str = "") -> str:
    """A run's status as the pane says it: "done · 12 ms", "running…", "running… · step 2 of 4"
    (an MCP server's progress), "" before it runs."""
    words = _STATUS_WORDS.get(status, "")
    if status in ("done", "error") and isinstance(duration_ms, int):
        words += f" · {duration_ms:,} ms"
    if status == "running" and progress:
        words += f" · {progress}"
    return words


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """One tool call as its pane shows it."""

    name: str
    status: str  # "" while the model is still writing it; then `streaming.tool_loop.CallRun.status`
    status_text: str
    arguments: str
    flag: str  # why the arguments are flagged (they ran, and were not a JSON object), else ""
    result: str


def tool_call_view(call: Mapping[str, Any]) -> ToolCallView:
    status = str(call.get("status") or "")
    raw = str(call.get("arguments") or "")
    arguments, valid = (raw, True) if not status else tools.pretty_arguments(raw)
    return ToolCallView(
        name=str(call.get("name") or "tool"),
        status=status,
        status_text=status_text(status, call.get("duration_ms")),
        arguments=arguments,
        flag="" if valid else INVALID_ARGUMENTS,
        result=str(call.get("result") or ""),
    )
