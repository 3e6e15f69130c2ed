"""One tool call as its pane shows it (`_tool_call.html`, whose markup live_render.js clones for
a call still streaming): its status in words, its arguments laid out, and whether they are flagged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chatapp import tools
from chatapp.tools import tool_loop

__all__ = ["ToolCallView", "tool_call_view"]


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """One tool call as its pane shows it."""

    name: str
    status: str  # "" while the model is still writing it; then `tool_loop.CallRun.status`
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
        status_text=tool_loop.status_text(status, call.get("duration_ms")),
        arguments=arguments,
        flag="" if valid else tool_loop.INVALID_ARGUMENTS,
        result=str(call.get("result") or ""),
    )
