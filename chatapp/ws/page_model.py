"""What a browser page does with one streaming answer's messages: the Python twin of the page's
state machine, `static/chatapp/stream_state.js`, for the Python code that plays a page (the fault
suite, the multiprocess tests, the load benchmark).

Pure, as its twin is: no Django, no clock, no IO. `receive(state, message, now)` takes a decoded
server message (`chatapp.messaging.socket_messages.decode`, or `from_wire` on the parsed JSON) and
the page's clock in milliseconds, and returns the new state and the effects, in order, for the
caller to carry out: `Send` is what the page sends back on its socket, the others what it draws
and fetches.
The two pass the same vectors (`tests/vectors/stream/`): change both together.

A delta at or below the state's `seq` is a duplicate and dropped; one beyond the next is a gap:
held back and a snapshot asked for (at most once a second), which replaces the text; the held
deltas after it then follow. Settled offsets count UTF-16 units, as the browser's strings do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

type Message = Mapping[str, Any]
"""A decoded server message: `{"t": "delta" | "snapshot" | "done" | "updated", "g", ...}`."""

SNAPSHOT_ASK_INTERVAL_MS: Final = 1000


@dataclass(frozen=True, slots=True)
class StreamState:
    """One answer as the page knows it. `content` is its text from UTF-16 offset `offset` (0, or
    where the page's render left its settled blocks, whose text the page holds only as HTML); up
    to `settled_end` it is shown as the server's settled HTML, the rest (`tail`) as text."""

    g: int
    seq: int = 0
    content: str = ""
    offset: int = 0
    settled_end: int = 0
    reasoning: str = ""
    draft: tuple[int, int] | None = None
    """`(start, end)` of the draft shown, if any."""
    held: Mapping[int, Message] = field(default_factory=dict)
    """Deltas beyond a gap, by seq."""
    asked_at: float | None = None
    """When a snapshot was last asked for, until one arrives."""
    snap_at: float | None = None
    done: bool = False

    @property
    def tail(self) -> str:
        return _utf16_slice(self.content, self.settled_end - self.offset)


@dataclass(frozen=True, slots=True)
class Settle:
    """Settled HTML to place: `joined` into the open block's element (or in its place, `join`
    "="), `rest` after it."""

    start: int
    end: int
    join: str | None
    joined: str
    rest: str


@dataclass(frozen=True, slots=True)
class Append:
    """A delta applied; its settled HTML with it, when it goes in. With `redraft`, the draft
    shown goes and `draft` (HTML placed as a settle is, in place of the tail's start up to its
    `end`), if any, takes its place; without, the draft shown stays."""

    delta: Message
    settle: Settle | None
    draft: Settle | None = None
    redraft: bool = False


@dataclass(frozen=True, slots=True)
class Replace:
    """A snapshot applied: the text so far replaced; `tail` is its content after the settled
    HTML, `draft` the draft to show in place of its start, if any."""

    snapshot: Message
    tail: str
    draft: Settle | None = None


@dataclass(frozen=True, slots=True)
class Send:
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Finish:
    """The answer ended (the page fetches its final render, and a next round if `done` names
    one)."""

    done: Message


@dataclass(frozen=True, slots=True)
class Refresh:
    """The record changed: the page fetches the answer's render again."""


type Effect = Append | Replace | Send | Finish | Refresh


@dataclass(frozen=True, slots=True)
class Step:
    state: StreamState
    effects: tuple[Effect, ...]


def start(
    g: int, seq: int = 0, settled_end: int = 0, tail: str = "", reasoning: str = ""
) -> StreamState:
    """The answer as the page was rendered (`data-seq`, `data-settled`, its live tail)."""
    return StreamState(
        g, seq, content=tail, offset=settled_end, settled_end=settled_end, reasoning=reasoning
    )


def from_wire(parsed: object) -> dict[str, Any]:
    """A message as parsed off the socket; a delta is a bare array, `[g, seq, content,
    reasoning?, extras?]` (`chatapp.messaging.socket_messages`)."""
    if not isinstance(parsed, list):
        assert isinstance(parsed, dict), parsed
        return parsed
    message: dict[str, Any] = {"t": "delta", "g": parsed[0], "seq": parsed[1]}
    message["content"] = (parsed[2] if len(parsed) > 2 else "") or ""
    if len(parsed) > 3 and parsed[3]:
        message["reasoning"] = parsed[3]
    if len(parsed) > 4 and parsed[4]:
        message.update(parsed[4])
    return message


def messages_from_wire(parsed: object) -> list[dict[str, Any]]:
    """A frame's messages as parsed off the socket: one, or a tick's deltas of several answers
    (`[[g, seq, ...], ...]`, `chatapp.streaming.frames`), in order."""
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], list):
        return [from_wire(delta) for delta in parsed]
    return [from_wire(parsed)]


def receive(state: StreamState, message: Message, now: float) -> Step:
    if state.done:
        return Step(state, ())
    change = _Change(state)
    match message.get("t"):
        case "delta":
            change.on_delta(message, now)
        case "snapshot":
            change.on_snapshot(message, now)
        case "done":
            change.done = True
            change.effects.append(Finish(message))
        case "updated":
            change.effects.append(Refresh())
        case _:
            return Step(state, ())
    return change.step()


def refuse_settle(state: StreamState, settle: Settle, now: float) -> Step:
    """The page could not put `settle` (an `Append`'s) into its open block: it shows that text as
    text and asks for a snapshot; it leaves out the settled HTML of the effects after it."""
    change = _Change(state)
    change.settled_end = settle.start
    change.draft = None
    change.ask_snapshot(now)
    return change.step()


def watch_sent(state: StreamState, now: float) -> Step:
    """A watch was sent at `now`: the server answers it with a snapshot of each running answer,
    so it stands for this answer's snapshot ask (a gap seen before that snapshot asks no more)."""
    if state.done:
        return Step(state, ())
    return Step(replace(state, asked_at=now), ())


def after_watch(state: StreamState, asked: float, now: float) -> Step:
    """A while after a watch sent at `asked`: an answer no snapshot has covered since asks."""
    if state.done or (state.snap_at is not None and state.snap_at >= asked):
        return Step(state, ())
    change = _Change(state)
    change.ask_snapshot(now)
    return change.step()


class _Change:
    """The state being changed by one step, and the effects so far."""

    def __init__(self, state: StreamState) -> None:
        self.state = state
        self.seq = state.seq
        self.content = state.content
        self.offset = state.offset
        self.settled_end = state.settled_end
        self.reasoning = state.reasoning
        self.draft = state.draft
        self.held = dict(state.held)
        self.asked_at = state.asked_at
        self.snap_at = state.snap_at
        self.done = state.done
        self.effects: list[Effect] = []

    def step(self) -> Step:
        state = replace(
            self.state,
            seq=self.seq,
            content=self.content,
            offset=self.offset,
            settled_end=self.settled_end,
            reasoning=self.reasoning,
            draft=self.draft,
            held=self.held,
            asked_at=self.asked_at,
            snap_at=self.snap_at,
            done=self.done,
        )
        return Step(state, tuple(self.effects))

    def tail(self) -> str:
        return _utf16_slice(self.content, self.settled_end - self.offset)

    def on_delta(self, message: Message, now: float) -> None:
        seq = message["seq"]
        if seq <= self.seq:
            return
        if seq > self.seq + 1:
            self.held[seq] = message
            self.ask_snapshot(now)
            return
        self.apply(message, now)
        self.drain_held(now)

    def on_snapshot(self, message: Message, now: float) -> None:
        self.asked_at = None
        self.snap_at = now
        if message["seq"] < self.seq:
            return
        settled = message.get("settled") or [0, 0, ""]
        self.offset = 0
        self.content = message.get("content") or ""
        self.settled_end = settled[1]
        self.reasoning = message.get("reasoning") or ""
        self.seq = message["seq"]
        draft = self.draft_of(message["draft"]) if message.get("draft") else None
        self.draft = (draft.start, draft.end) if draft is not None else None
        self.effects.append(Replace(message, self.tail(), draft))
        self.drain_held(now)

    def apply(self, message: Message, now: float) -> None:
        self.content += message.get("content") or ""
        settled = message.get("settled")
        settle = self.settle(settled, now) if settled else None
        self.reasoning += message.get("reasoning") or ""
        self.seq = message["seq"]
        if not ("draft" in message or settled):
            self.effects.append(Append(message, settle))
            return
        # A settle takes the draft's place; a draft that does not start where the settled part
        # ends (this page's blocks were split elsewhere) is not shown.
        draft = self.draft_of(message["draft"]) if message.get("draft") else None
        self.draft = (draft.start, draft.end) if draft is not None else None
        self.effects.append(Append(message, settle, draft, redraft=True))

    def draft_of(self, wire: list[Any]) -> Settle | None:
        start, end, html = wire[0], wire[1], wire[2]
        join, split = (wire[3], wire[4]) if len(wire) > 4 else (None, 0)
        if start != self.settled_end or end < start or end - self.offset > _utf16_len(self.content):
            return None
        if not join:
            return Settle(start, end, None, "", html)
        return Settle(start, end, join, _utf16_slice(html, 0, split), _utf16_slice(html, split))

    def settle(self, settled: list[Any], now: float) -> Settle | None:
        start, end, html = settled[0], settled[1], settled[2]
        join, split = (settled[3], settled[4]) if len(settled) > 4 else (None, 0)
        if start != self.settled_end or end - start > _utf16_len(self.tail()):
            self.ask_snapshot(now)  # this page's blocks were split elsewhere (it rendered first)
            return None
        self.settled_end = end
        if not join:
            return Settle(start, end, None, "", html)
        return Settle(start, end, join, _utf16_slice(html, 0, split), _utf16_slice(html, split))

    def drain_held(self, now: float) -> None:
        while (following := self.held.pop(self.seq + 1, None)) is not None:
            self.apply(following, now)
        for seq in [seq for seq in self.held if seq <= self.seq]:
            del self.held[seq]
        if self.held:
            self.ask_snapshot(now)

    def ask_snapshot(self, now: float) -> None:
        if self.asked_at is not None and now - self.asked_at < SNAPSHOT_ASK_INTERVAL_MS:
            return
        self.asked_at = now
        self.effects.append(Send({"t": "snapshot", "g": self.state.g}))


def _utf16_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _utf16_slice(text: str, start: int, end: int | None = None) -> str:
    """`text.slice(start, end)` as JavaScript counts: in UTF-16 units."""
    if text.isascii():
        return text[start:end]
    units = text.encode("utf-16-le")
    return units[2 * start : None if end is None else 2 * end].decode("utf-16-le", "replace")
