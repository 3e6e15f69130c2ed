"""What a browser shows of one streaming answer, applied exactly as `static/chatapp/chat.js` does.

`onDelta`: a delta at or below `seq` is a duplicate and dropped; one beyond `seq + 1` is a gap:
held back, and a snapshot asked for (at most once a second). `onSnapshot`: older than `seq` is
ignored, else it replaces the text and `seq`, then the held deltas that follow are drained.
`done` ends the stream (the page then fetches the final render). Every text the page showed is
kept, so a test can check each one against what the database stored.

Only the text is modelled (content and reasoning); settled HTML blocks are the same text
rendered, and tool calls, citations and media are not what these faults break.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SNAPSHOT_ASK_INTERVAL = 1.0  # chat.js `askSnapshot`: one request a second at most


@dataclass
class ShownAnswer:
    generation_pk: int
    seq: int = 0
    content: str = ""
    reasoning: str = ""
    held: dict[int, dict[str, Any]] = field(default_factory=dict)
    done: dict[str, Any] | None = None
    dones: int = 0
    asked_at: float = 0.0
    snapshot_asks: int = 0
    snapshots: int = 0
    applied: list[int] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    """Every content the page showed, in order."""
    clock: Callable[[], float] = time.monotonic

    def handle(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """Apply one decoded server message (`ws.protocol.decode`); what the page sends back."""
        if message.get("g") != self.generation_pk:
            return []
        out: list[dict[str, Any]] = []
        match message["t"]:
            case "delta":
                self._on_delta(message, out)
            case "snapshot":
                self._on_snapshot(message, out)
            case "done":
                self.dones += 1
                if self.done is None:
                    self.done = message
        return out

    def _on_delta(self, message: dict[str, Any], out: list[dict[str, Any]]) -> None:
        if self.done is not None or message["seq"] <= self.seq:
            return
        if message["seq"] > self.seq + 1:
            self.held[message["seq"]] = message
            self._ask_snapshot(out)
            return
        self._apply(message)
        self._drain(out)

    def _on_snapshot(self, message: dict[str, Any], out: list[dict[str, Any]]) -> None:
        self.asked_at = 0.0
        self.snapshots += 1
        if self.done is not None or message["seq"] < self.seq:
            return
        self.content = message.get("content") or ""
        self.reasoning = message.get("reasoning") or ""
        self.seq = message["seq"]
        self.shown.append(self.content)
        self._drain(out)

    def _apply(self, message: dict[str, Any]) -> None:
        self.content += message.get("content", "")
        self.reasoning += message.get("reasoning", "")
        self.seq = message["seq"]
        self.applied.append(message["seq"])
        self.shown.append(self.content)

    def _drain(self, out: list[dict[str, Any]]) -> None:
        while (following := self.held.pop(self.seq + 1, None)) is not None:
            self._apply(following)
        for seq in [seq for seq in self.held if seq <= self.seq]:
            del self.held[seq]
        if self.held:
            self._ask_snapshot(out)

    def _ask_snapshot(self, out: list[dict[str, Any]]) -> None:
        now = self.clock()
        if now - self.asked_at < SNAPSHOT_ASK_INTERVAL:
            return
        self.asked_at = now
        self.snapshot_asks += 1
        out.append({"t": "snapshot", "g": self.generation_pk})

    def not_prefix_of(self, stored: str) -> list[str]:
        """The texts this page showed that are not a prefix of `stored` (should be none)."""
        return [text for text in self.shown if not stored.startswith(text)]
