"""What a browser shows of one streaming answer: `chatapp.ws.page_model` (the twin of the page's
`static/chatapp/stream_state.js`) fed what a socket receives, with a record of what it did.

Every text the page showed is kept, so a test can check each one against what the database
stored. The record counts what a fault test asks about: snapshots asked for and received, the
deltas applied, the `done` messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chatapp.ws import page_model
from chatapp.ws.page_model import Append, Finish, Replace, Send


@dataclass
class ShownAnswer:
    generation_pk: int
    done: dict[str, Any] | None = None
    """The `done` that ended the answer."""
    dones: int = 0
    snapshot_asks: int = 0
    snapshots: int = 0
    applied: list[int] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    """Every content the page showed, in order."""
    clock: Callable[[], float] = time.monotonic
    state: page_model.StreamState = field(init=False)

    def __post_init__(self) -> None:
        self.state = page_model.start(self.generation_pk)

    @property
    def seq(self) -> int:
        return self.state.seq

    @property
    def content(self) -> str:
        return self.state.content

    @property
    def reasoning(self) -> str:
        return self.state.reasoning

    def watch_sent(self) -> None:
        """The page's socket sent a watch (which stands for a snapshot ask)."""
        self.state = page_model.watch_sent(self.state, self.clock() * 1000).state

    def handle(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """Apply one decoded server message (`socket_messages.decode`); what the page sends back."""
        if message.get("g") != self.generation_pk:
            return []
        self.dones += message["t"] == "done"
        self.snapshots += message["t"] == "snapshot"
        step = page_model.receive(self.state, message, self.clock() * 1000)
        self.state = step.state
        out: list[dict[str, Any]] = []
        for effect in step.effects:
            match effect:
                case Append(delta=delta):
                    self.applied.append(delta["seq"])
                case Send(message=reply):
                    self.snapshot_asks += 1
                    out.append(reply)
                case Finish(done=done):
                    self.done = dict(done)
        if any(isinstance(effect, Append | Replace) for effect in step.effects):
            self.shown.append(self.state.content)
        return out

    def not_prefix_of(self, stored: str) -> list[str]:
        """The texts this page showed that are not a prefix of `stored` (should be none)."""
        return [text for text in self.shown if not stored.startswith(text)]
