"""A streaming answer's markdown, rendered piece by piece as each piece settles.

A piece is *settled* once nothing that can still arrive would change it. Whole top-level blocks
settle once the next one has started (outside any open fence), or at once if they cannot grow (a
closed fence, a heading, a thematic break). Inside the block still being written, pieces settle
too, so that no block waits for its end and no delta's work grows with it: a list's items once
the next item begins, a table's rows (the header with its `|---|` line) as their lines end, a
quote's inner blocks once the next begins, a long paragraph's lines but its last. Only complete
lines count: a half-written line may still turn out to be something else (`#` is a heading,
`#tag` is text).

Each step parses only the unsettled tail (`rendering.settle_steps`, run in the render pool: the
server's loop never runs markdown-it) and renders the settled part once, from that parse, so a
list's items render tight or loose as in the whole. A piece inside the open block is sent as a
*join*: HTML the browser appends into that block's element (`static/chatapp/chat.js`), so a list
split into ten pieces is one `<ul>` on screen, and the pieces joined are what the final render
says.
When a later line changes what was settled (a list turns loose, a paragraph becomes a setext
heading), the open block is rendered again from its source once and *replaces* its element. A
table's rows are parsed under its header (kept, with the other context, in `OpenBlock`).

Work per answer is linear in its length: each step costs its tail, the tail is one piece of one
block in the common case, and when a tail cannot be cut (one huge list item, a nested structure)
the next step waits until the tail has grown by a quarter (`BACKOFF`), so the parses of it add up
to a constant times its length. `BlockSettler.parsed` counts the characters parsed.

Offsets sent to the browser count UTF-16 code units, as JavaScript strings do.

A chunk or draft goes to every watching browser in one frame, so none longer than a bound goes
out (#45: a gateway's one 300,000-character paragraph went out whole): `MAX_SETTLED_HTML` for a
chunk, sent once, and `MAX_FRAME_TEXT` for a draft, sent again as it changes. A chunk whose HTML
would be longer settles as plain text (a long highlighted code block: its HTML is 3-5 times its
source); if even that is too long, the settler *halts* for the rest of the answer (what follows a
block cannot settle before it). A draft that would be longer is dropped. Browsers
keep showing such text as it arrived, and the final render they fetch at `done` draws it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from chatapp.messaging.socket_messages import MAX_FRAME_TEXT, MAX_SETTLED_HTML
from chatapp.rendering.markdown import plain_text_html
from chatapp.rendering.settle_steps import (
    LINE_BREAK,
    MARKUP,
    Citations,
    Join,
    OpenBlock,
    Settling,
    Step,
    closes_fence,
    utf16_length,
)

if TYPE_CHECKING:
    from chatapp.rendering.pool import Runner

FREE_TAIL = 512  # a tail this short is parsed at every new line
BACKOFF = 1.25  # else only once it has grown by this factor since it was last parsed
# The draft of the unsettled tail (see `BlockSettler.take_draft`): rendered at most this often
# (seconds) and only while the tail is this short (characters), so that its work per answer is
# bounded by the answer's duration, not by the square of one long block.
DRAFT_INTERVAL = 0.15
DRAFT_MAX = 4_000


@dataclass(frozen=True, slots=True)
class SettledChunk:
    """The HTML of the answer's text from UTF-16 offset `start` to `end`. With `join`, its first
    `split` UTF-16 units go into the open block's element (`"="`: replace it), the rest after."""

    start: int
    end: int
    html: str
    join: Join = ""
    split: int = 0

    def to_wire(self) -> list[object]:
        if not self.join:
            return [self.start, self.end, self.html]
        return [self.start, self.end, self.html, self.join, self.split]


# --- The settler (on the server's loop) -----------------------------------------------------------


class _OpenFence:
    """The unsettled tail is a fence still open: only a closing fence line can settle it, so new
    lines are checked for one instead of parsing the whole block again."""

    __slots__ = ("checked", "marker")

    def __init__(self, marker: str, checked: int) -> None:
        self.marker = marker
        self.checked = checked  # how much of the tail holds no closing fence in complete lines

    def may_close(self, tail: str) -> bool:
        end = tail.rfind("\n") + 1
        start = self.checked
        self.checked = max(start, end)
        return any(closes_fence(line, self.marker) for line in LINE_BREAK.split(tail[start:end]))


class BlockSettler:
    """Feeds on an answer's content as it arrives; gives each newly settled chunk's HTML once.

    `feed` only appends; a parse of the tail runs in the render pool (`run`, by default
    `render_pool.run`) while the stream goes on, and `ready` hands out what it settled, so a
    slow render delays the blocks, never the text. `finish` settles the rest.

    While a line is being written its markdown would show raw until the line ends, so the parses
    also render a *draft*: the unsettled tail rendered as it would settle if the answer ended
    now (`take_draft`), which browsers show in place of its text and drop at the next settled
    chunk. A parse renders one with each new line, and `poll` starts one for a line that grew,
    at most every `DRAFT_INTERVAL` and only for a tail shorter than `DRAFT_MAX`.
    """

    def __init__(
        self,
        doc_id: str = "",
        citations: Callable[[], Citations] | None = None,
        run: Runner | None = None,
    ) -> None:
        """`doc_id` and `citations` (those known so far, asked for when a chunk is rendered) are
        what the final render is given (`rendering.markdown.render_markdown`)."""
        self._doc_id = doc_id
        self._citations = citations
        self._run = run
        self._tail = ""  # the content after the settled part
        self._settled = 0  # UTF-16 length of the settled part
        self._pieces: list[str] = []  # the settled HTML, but the open block's closing tags
        self._open: OpenBlock | None = None
        self._open_at = 0  # where in `_pieces` the open block starts
        self._fence: _OpenFence | None = None
        self._task: asyncio.Task[object] | None = None
        self._asked = 0  # characters of the tail when it was last parsed
        self._parse_at = 0  # the tail length that may be parsed next (the back-off)
        self._restyle = False
        self._drafting = False  # whether the parse under way renders no step, only a draft
        self._draft: SettledChunk | None = None  # the newest draft, until a delta takes it
        self._draft_changed = False  # since a delta last took it (a new one, or none now)
        self._shown_draft: SettledChunk | None = None  # the newest, while still valid
        self._drafted = (0, 0)  # (settled, tail length) the newest draft was asked for at
        self._draft_at = -DRAFT_INTERVAL  # when the last draft-only parse started
        self._halted = False  # a chunk was too long for a frame: nothing more settles live
        self.parsed = 0  # characters parsed, in all

    @property
    def settled(self) -> int:
        return self._settled

    @property
    def doc_id(self) -> str:
        return self._doc_id

    @property
    def runner(self) -> Runner | None:
        """What runs its parses (None: the render pool)."""
        return self._run

    @property
    def html(self) -> str:
        """Every settled chunk's HTML, joined as the browser joins it: what a snapshot shows."""
        closing = self._open.closing if self._open is not None else ""
        return "".join(self._pieces) + closing

    @property
    def draft(self) -> SettledChunk | None:
        """The newest draft, while it still starts where the settled part ends (a snapshot's)."""
        draft = self._shown_draft
        return draft if draft is not None and draft.start == self._settled else None

    def feed(self, text: str) -> None:
        """Add `text` to the content (settling waits for `ready`)."""
        self._tail += text

    def ready(self) -> SettledChunk | None:
        """The chunk the last parse settled, once it is done; starts the next parse if due."""
        chunk = None
        task = self._task
        if task is not None and task.done():
            self._task = None
            failed = task.cancelled() or task.exception() is not None
            chunk = self._apply(None if failed else task.result(), final=False)
        if self._task is None and self._due():
            self._start()
        return chunk

    def poll(self, now: float) -> bool:
        """Start a draft-only parse if one is due at `now` (seconds, a monotonic clock); whether
        a parse has ended, so that `ready` and `take_draft` have something to hand out."""
        task = self._task
        if task is not None:
            return task.done()
        if self._due():
            self._start()
        elif self._draft_due(now):
            self._draft_at = now
            self._start(drafting=True)
        return False

    def take_draft(self) -> tuple[bool, SettledChunk | None]:
        """Whether the draft changed since it was last taken, and the newest (None: the one
        shown is withdrawn); after `ready`, so it starts where the settled part now ends."""
        changed, draft = self._draft_changed, self._draft
        self._draft_changed, self._draft = False, None
        if draft is not None and draft.start != self._settled:
            draft = None
        return changed, draft

    async def step(self) -> SettledChunk | None:
        """`ready`, after waiting for the parse under way (for tests and benchmarks)."""
        if self._task is None and self._due():
            self._start()
        if self._task is not None:
            await asyncio.wait([self._task])
        return self.ready()

    async def finish(self) -> SettledChunk | None:
        """Settle everything left: the answer has ended. A parse under way is not applied: one
        last parse of the whole tail takes its place."""
        if self._task is not None:
            await asyncio.wait([self._task])
            self._task = None
        self._drafting = False
        self._draft = self._shown_draft = None  # the last chunk settles all it showed
        if not self._tail or self._halted:
            return None
        result = await self._job(final=True, restyle=self._restyle)
        if isinstance(result, Step) and result.restyle:
            result = await self._job(final=True, restyle=True)
        return self._apply(result, final=True)

    def _due(self) -> bool:
        if self._halted:
            return False
        complete = self._tail.rfind("\n") + 1
        if complete <= self._asked:
            return False  # no new complete line
        if self._restyle:
            return True
        if self._fence is not None and not self._fence.may_close(self._tail):
            self._asked = complete
            return False
        return complete < FREE_TAIL or complete >= self._parse_at

    def _draftable(self) -> bool:
        return (
            self._fence is None
            and not self._halted
            and not self._restyle
            and 0 < len(self._tail) <= DRAFT_MAX
            and self._drafted != (self._settled, len(self._tail))
        )

    def _draft_due(self, now: float) -> bool:
        """A draft-only parse is due when the line the draft shown ends in, or any after it,
        holds markup: text without any shows as itself after the draft, so a new draft would
        only resend the old one's HTML."""
        if now - self._draft_at < DRAFT_INTERVAL or not self._draftable():
            return False
        settled, length = self._drafted
        since = length if settled == self._settled and self.draft is not None else 0
        line = self._tail.rfind("\n", 0, since) + 1  # a marker starts its line (`1.`, `#`)
        return MARKUP.search(self._tail, line) is not None

    def _start(self, *, drafting: bool = False) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # a fold outside the server (a test's): nothing settles before `finish`
        complete = self._tail.rfind("\n") + 1
        draft = self._draftable()
        if not drafting:
            self._asked = complete
        if draft:
            self._drafted = (self._settled, len(self._tail))
        restyle, self._restyle = (False, self._restyle) if drafting else (self._restyle, False)
        self._drafting = drafting
        lines = "" if drafting else self._tail[:complete]
        rest = (self._tail if drafting else self._tail[complete:]) if draft else None
        self._task = asyncio.ensure_future(self._parse(lines, rest, restyle=restyle))

    async def _parse(self, lines: str, rest: str | None, *, restyle: bool) -> object:
        from chatapp.rendering import pool as render_pool
        from chatapp.rendering import pool_jobs

        citations = list(self._citations()) if self._citations is not None else []
        run = self._run or render_pool.run
        self.parsed += len(lines) + len(rest or "")
        self.parsed += len(self._open.source) if restyle and self._open else 0
        return await run(
            pool_jobs.settle_and_draft, lines, rest, self._open, citations, self._doc_id, restyle
        )

    async def _job(self, *, final: bool, restyle: bool) -> object:
        from chatapp.rendering import pool as render_pool
        from chatapp.rendering import pool_jobs

        citations = list(self._citations()) if self._citations is not None else []
        run = self._run or render_pool.run
        tail = self._tail if final else self._tail[: self._tail.rfind("\n") + 1]
        self.parsed += len(tail) + (len(self._open.source) if restyle and self._open else 0)
        return await run(
            pool_jobs.settle, tail, self._open, citations, self._doc_id, final, restyle
        )

    def _apply(self, result: object, *, final: bool) -> SettledChunk | None:
        if isinstance(result, Settling):
            drafting, self._drafting = self._drafting, False
            chunk = None if drafting else self._apply(result.step, final=final)
            if result.draft is not None:
                self._keep_draft(result.draft, result.drafted)
            elif self.draft is not None:  # shown, and no longer true (an open fence, a restyle)
                self._withdraw_draft()
            return chunk
        if self._drafting:  # a draft-only parse that failed: nothing to settle from it
            self._drafting = False
            return None
        if not isinstance(result, Step):
            return self._fall_back(result, final=final)
        step = result
        if step.restyle:
            self._restyle = True
            return None
        self._parse_at = 0 if step.length else int(self._asked * BACKOFF)
        self._fence = _OpenFence(*step.fence) if step.fence is not None else None
        if not (step.length or step.joined or step.ended):
            return None
        return self._take(step)

    @property
    def drafted_html(self) -> str:
        """The settled HTML with the newest draft joined in as the browser joins it: what the
        page shows of the answer's markdown (before the text after the draft)."""
        draft = self.draft
        if draft is None:
            return self.html
        step = Step(join=draft.join, joined=draft.html[: _index(draft.html, draft.split)])
        step = replace(step, rest=draft.html[len(step.joined) :])
        pieces = list(self._pieces)
        _join(pieces, self._open_at, self._open, step)
        return "".join(pieces)

    def _take(self, step: Step) -> SettledChunk | None:
        if len(step.html) > MAX_SETTLED_HTML:
            text = self._tail[: step.length]
            plain = plain_text_html(text, "streaming")
            if not text or len(plain) > MAX_SETTLED_HTML:
                self._halt()
                return None
            step = Step(length=step.length, rest=plain)  # the open block ends before it
        pieces = self._pieces
        self._open_at = _join(pieces, self._open_at, self._open, step)
        self._open = step.opened
        text, self._tail = self._tail[: step.length], self._tail[step.length :]
        self._asked = max(0, self._asked - step.length)
        start = self._settled
        self._settled += utf16_length(text)
        html = step.html
        if not html and not step.length:
            return None
        split = utf16_length(step.joined) if step.join else 0
        return SettledChunk(start, self._settled, html, step.join, split)

    def _keep_draft(self, draft: Step, drafted: int) -> None:
        """`draft` covers the first `drafted` characters of the tail (which only grew since)."""
        if self._halted or len(draft.html) > MAX_FRAME_TEXT:  # too long for a frame: none
            self._withdraw_draft()
            return
        start = self._settled
        end = start + utf16_length(self._tail[:drafted])
        split = utf16_length(draft.joined) if draft.join else 0
        chunk = SettledChunk(start, end, draft.html, draft.join, split)
        self._draft = self._shown_draft = chunk
        self._draft_changed = True

    def _withdraw_draft(self) -> None:
        if self._shown_draft is not None:
            self._draft_changed = True
        self._draft = self._shown_draft = None

    def _halt(self) -> None:
        """Settle nothing more live: the rest shows as text until the final render."""
        self._halted = True
        self._withdraw_draft()

    def _fall_back(self, failure: object, *, final: bool) -> SettledChunk | None:
        """The parse gave no result. Too slow or crashed: the complete lines settle as plain
        text, so the same lines are not tried again; busy: they wait for the next parse."""
        from chatapp.rendering.pool import Failure

        kind = failure.kind if isinstance(failure, Failure) else "crashed"
        if kind == "busy" and not final:
            self._asked = 0
            return None
        length = len(self._tail) if final else self._tail.rfind("\n") + 1
        if not length:
            return None
        text = self._tail[:length]
        step = Step(length=length, rest=plain_text_html(text, kind))
        self._fence = None
        return self._take(step)


def _join(pieces: list[str], open_at: int, opened: OpenBlock | None, step: Step) -> int:
    """Add `step`'s HTML to the settled `pieces`, whose open block (`opened`) starts at
    `open_at`; where the open block starts after it."""
    closed = opened.closing if opened is not None else ""
    if step.join == "=":
        del pieces[open_at:]
        kept = step.joined
        if step.continues and step.opened is not None:
            kept = kept.removesuffix(step.opened.closing)
        pieces.append(kept)
    elif step.join:
        pieces.append(step.joined)
        if not step.continues:  # a table's first rows came with their `<tbody>`
            pieces.append("</tbody>\n" + closed if step.join == "table" else closed)
    elif opened is not None:
        pieces.append(closed)  # it ended, nothing more joined
    if step.rest:
        pieces.append(step.rest)
    if step.opening and step.opened is not None:
        open_at = len(pieces)
        pieces.append(step.opening.removesuffix(step.opened.closing))
    return open_at


def _index(text: str, units: int) -> int:
    """The index in `text` of its UTF-16 offset `units`."""
    if text.isascii():
        return units
    return len(text.encode("utf-16-le")[: 2 * units].decode("utf-16-le"))


# --- A page view of an answer still streaming -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartialAnswer:
    """What a page shows of an answer still streaming, before its live snapshot arrives: the
    settled part rendered (`html`, ending at UTF-16 offset `settled`), the rest as text. Pages
    render none of it (`templatetags.chat.partial_answer`): the snapshot the page asks for as it
    opens brings the blocks, rendered in the pool."""

    html: str
    settled: int
    tail: str
