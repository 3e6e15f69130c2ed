"""What a tool is, and what running one gives back: the contract between the registry
(`chatapp/tools/__init__.py`), each tool's module and the tool-calling loop
(`streaming/tool_loop.py`).

A tool's `run` is called off the event loop (a tool may read the database) with arguments that
have already been parsed and checked against its `parameters` schema; whatever goes wrong in it
is the tool's error result for the model, never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from chatapp.errors import ChatAppError

type RunStatus = Literal["done", "error"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Whose call it is: a tool reads nothing but this user's data."""

    user_pk: int
    conversation_pk: int


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One call's run: `result` is the text the model is sent as the `tool` message; `error`
    runs (arguments that are not JSON or break the schema, an unknown or disabled tool, a tool
    that failed) say what was wrong in it, so the model can correct itself."""

    status: RunStatus
    result: str
    duration_ms: int


class ToolFailure(ChatAppError):
    """Raised by a tool for a failure the model should be told about in words."""


class Tool(Protocol):
    """Read-only members: a built-in's class attributes, or an MCP tool's frozen fields."""

    @property
    def name(self) -> str:
        """What the model calls: ^[a-zA-Z0-9_-]{1,64}$."""
        ...

    @property
    def title(self) -> str:
        """What the Tools control lists."""
        ...

    @property
    def about(self) -> str:
        """What the Tools control says it does, to the user, in a line."""
        ...

    @property
    def description(self) -> str:
        """What the model is told it does."""
        ...

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the arguments object."""
        ...

    @property
    def private(self) -> bool:
        """Its results hold the user's other data, which a shared link does not show."""
        ...

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """The result as text for the model (JSON or prose); `ToolFailure` for a readable error."""
        ...
