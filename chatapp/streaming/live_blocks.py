"""A streaming answer's markdown, rendered piece by piece as each piece settles.

A piece is *settled* once nothing that can still arrive would change it. Whole top-level blocks
settle once the next one has started (outside any open fence), or at once if they cannot grow (a
closed fence, a heading, a thematic break). Inside the block still being written, pieces settle
too, so that no block waits for its end and no delta's work grows with it: a list's items once
the next item begins, a table's rows (the header with its `|---|` line) as their lines end, a
quote's inner blocks once the next begins, a long paragraph's lines but its last. Only complete
lines count: a half-written line may still turn out to be something else (`#` is a heading,
`#tag` is text).

Each step parses only the unsettled tail (`settle_step`, run in the render pool: the server's
loop never runs markdown-it) and renders the settled part once, from that parse, so a list's
items render tight or loose as in the whole. A piece inside the open block is sent as a *join*:
HTML the browser appends into that block's element (`static/chatapp/chat.js`), so a list split
into ten pieces is one `<ul>` on screen, and the pieces joined are what the final render says.
When a later line changes what was settled (a list turns loose, a paragraph becomes a setext
heading), the open block is rendered again from its source once and *replaces* its element. A
table's rows are parsed under its header (kept, with the other context, in `OpenBlock`).

Work per answer is linear in its length: each step costs its tail, the tail is one piece of one
block in the common case, and when a tail cannot be cut (one huge list item, a nested structure)
the next step waits until the tail has grown by a quarter (`BACKOFF`), so the parses of it add up
to a constant times its length. `BlockSettler.parsed` counts the characters parsed.

Offsets sent to the browser count UTF-16 code units, as JavaScript strings do.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from markdown_it.token import Token
from markdown_it.utils import EnvType

from chatapp.rendering.markdown import (
    parse,
    parse_blocks,
    plain_text_html,
    render_markdown,
    render_tokens,
)

type Citations = Sequence[Mapping[str, object]]
type Join = Literal["", "ul", "ol", "blockquote", "p", "table", "tbody", "="]

_LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
# Top-level blocks that no later line can extend, once their lines are complete.
_FINAL_BLOCKS = frozenset({"heading_open", "hr"})
_LISTS = {"bullet_list_open": "ul", "ordered_list_open": "ol"}
FREE_TAIL = 512  # a tail this short is parsed at every new line
BACKOFF = 1.25  # else only once it has grown by this factor since it was last parsed
PARAGRAPH_CUT_LINES = 8  # a paragraph's lines settle one by one once it has this many
MAX_TABLE_HEADER = 2_000  # characters; a table with a longer header settles whole


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


@dataclass(frozen=True, slots=True)
class OpenBlock:
    """The block the settled part ends inside: the tail's first block continues it. `header` is
    a table's first two lines (its rows are parsed under them); `body` whether a row settled;
    `loose` a list's looseness when its items settled; `source` the block's settled text."""

    kind: Literal["ul", "ol", "blockquote", "p", "table"]
    closing: str
    header: str = ""
    body: bool = False
    loose: bool = False
    source: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """What one parse of the tail settled: `length` characters of it, as `joined` (into the
    open block, by `join`) then `rest` (whole blocks) then `opening` (a block left open, ending
    in its `closing`). `opened` is the open block after it; `fence` says the tail is an open
    fence (its marker, and how much of the new tail holds no closing line); `restyle` that the
    open block must be rendered again from its source."""

    length: int = 0
    join: Join = ""
    joined: str = ""
    continues: bool = False
    rest: str = ""
    opening: str = ""
    opened: OpenBlock | None = None
    ended: bool = False  # the open block ended with nothing more to join
    fence: tuple[str, int] | None = None
    restyle: bool = False

    @property
    def html(self) -> str:
        return self.joined + self.rest + self.opening


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _line_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in _LINE_BREAK.finditer(text))]


def _closes(line: str, marker: str) -> bool:
    """Whether `line` closes a fence opened with `marker` (the same character, as many or more)."""
    found = _FENCE_LINE.match(line)
    fence = found.group(1) if found else ""
    return fence[:1] == marker[:1] and len(fence) >= len(marker)


def _cannot_grow(token: Token, lines: list[int], text: str) -> bool:
    if token.type in _FINAL_BLOCKS:
        return True
    if token.type != "fence" or token.map is None:
        return False
    start, end = token.map
    if end - start < 2:
        return False
    closing = text[lines[end - 1] : lines[end] if end < len(lines) else len(text)]
    return _closes(closing.rstrip("\r\n"), token.markup)


# --- The step (in a render process) ---------------------------------------------------------------


@dataclass(slots=True)
class _Parsed:
    """The tail parsed, under `prefix` (a table header, or a restyled block's source)."""

    text: str
    prefix: int  # characters of `text` before the tail
    tokens: list[Token]
    env: EnvType
    lines: list[int]
    blocks: list[int] = field(default_factory=list)  # indices of top-level block tokens

    def offset(self, line: int) -> int:
        """The tail offset where `line` (of `text`) starts."""
        at = self.lines[line] if line < len(self.lines) else len(self.text)
        return at - self.prefix

    def close(self, index: int) -> int:
        """The index of the token closing the block opened at `index` (itself if none)."""
        token = self.tokens[index]
        if token.nesting != 1:
            return index
        for i in range(index + 1, len(self.tokens)):
            other = self.tokens[i]
            if other.level == token.level and other.nesting == -1:
                return i
        return len(self.tokens) - 1

    def start_line(self, index: int) -> int:
        found = self.tokens[index].map
        return found[0] if found else 0

    def end_line(self, index: int) -> int:
        found = self.tokens[index].map
        return found[1] if found else 0


def _parse(text: str, prefix: str, citations: Citations, doc_id: str) -> _Parsed:
    whole = prefix + text
    tokens, env = parse(whole, citations, doc_id=doc_id)
    parsed = _Parsed(whole, len(prefix), tokens, env, _line_starts(whole))
    parsed.blocks = [i for i, t in enumerate(tokens) if t.level == 0 and t.map and t.nesting >= 0]
    return parsed


def settle_step(
    tail: str,
    context: OpenBlock | None,
    citations: Citations,
    doc_id: str,
    final: bool = False,
    restyle: bool = False,
) -> Step:
    """What of `tail` (the text after the settled part, which ends inside `context` if that is
    given) has settled. `final`: the answer has ended, all of it. `restyle`: render the open
    block again from `context.source`, replacing it."""
    text = tail if final else tail[: tail.rfind("\n") + 1]
    if not text.strip():
        if final:
            return Step(length=len(text), ended=context is not None)
        return Step(opened=context)
    if context is not None and context.kind == "table":
        # Rows only parse as rows under their header; the tail's first block is the table then.
        parsed = _parse(text, context.header, citations, doc_id)
        first = parsed.blocks[0] if parsed.blocks else None
        if first is None or parsed.end_line(first) <= 2:
            # The table is over: the tail is parsed on its own.
            return _rest(_parse(text, "", citations, doc_id), 0, final, ended=True)
        return _continue_table(parsed, context, final)
    prefix = context.source if context is not None and restyle else ""
    parsed = _parse(text, prefix, citations, doc_id)
    if context is None:
        return _rest(parsed, 0, final)
    if not parsed.blocks:
        return Step(opened=context)
    first = parsed.blocks[0]
    token = parsed.tokens[first]
    if restyle:
        return _replace(parsed, context, final)
    if _kind(token) != context.kind or parsed.start_line(first) != 0:
        return Step(opened=context, restyle=True)  # what was settled reads otherwise now
    if context.kind in ("ul", "ol"):
        if _loose(parsed, first) and not context.loose:
            return Step(opened=context, restyle=True)  # its settled items showed tight
        if context.loose:
            _show_paragraphs(parsed, first)  # the tail alone may read tight: the list is not
    return _continue(parsed, context, final)


def _kind(token: Token) -> str:
    return {
        **_LISTS,
        "blockquote_open": "blockquote",
        "paragraph_open": "p",
        "table_open": "table",
    }.get(token.type, "")


def _loose(parsed: _Parsed, index: int) -> bool:
    """Whether the list opened at `index` is loose (its paragraphs show)."""
    level = parsed.tokens[index].level + 2
    for i in range(index + 1, parsed.close(index)):
        token = parsed.tokens[i]
        if token.type == "paragraph_open" and token.level == level:
            return not token.hidden
    return False


def _show_paragraphs(parsed: _Parsed, index: int) -> None:
    """Render the list at `index` loose: its items' paragraphs as paragraphs."""
    level = parsed.tokens[index].level + 2
    for i in range(index + 1, parsed.close(index)):
        token = parsed.tokens[i]
        if token.type in ("paragraph_open", "paragraph_close") and token.level == level:
            token.hidden = False


def _rest(parsed: _Parsed, position: int, final: bool, *, ended: bool = False) -> Step:
    """Whole blocks from `parsed.blocks[position]` on, then the inside of the last one."""
    blocks = parsed.blocks[position:]
    if not blocks:
        return Step(length=len(parsed.text) - parsed.prefix if final else 0, ended=ended)
    last = blocks[-1]
    lines, text = parsed.lines, parsed.text
    whole = final or _cannot_grow(parsed.tokens[last], lines, text)
    end_index = len(parsed.tokens) if whole else last
    rest = render_tokens(parsed.tokens[blocks[0] : end_index], parsed.env) if blocks else ""
    if final:
        length = len(text) - parsed.prefix
    elif whole:  # to the end of the block that cannot grow (blank lines wait for the next)
        length = parsed.offset(parsed.end_line(last))
    else:
        length = parsed.offset(parsed.start_line(last))
    if whole:
        return Step(length=length, rest=rest, ended=ended)
    step = _open_inside(parsed, last)
    if step is None:
        token = parsed.tokens[last]
        settled = length if rest else 0  # blank lines alone stay with the next block
        fence = None
        if token.type == "fence" and parsed.start_line(last) + 1 < len(lines):
            fence = (token.markup, parsed.offset(parsed.start_line(last) + 1) - settled)
        return Step(length=settled, rest=rest, fence=fence, ended=ended)
    return replace(step, length=length + step.length, rest=rest, ended=ended)


def _open_inside(parsed: _Parsed, index: int) -> Step | None:
    """The settled start of the open block at `index`, rendered on its own, left open."""
    token = parsed.tokens[index]
    kind = _kind(token)
    close = parsed.close(index)
    start = parsed.start_line(index)
    begin = parsed.offset(start)
    if kind in ("ul", "ol", "blockquote"):
        cut = _last_child(parsed, index, close)
        if cut is None:
            return None
        html = render_tokens([*parsed.tokens[index:cut], parsed.tokens[close]], parsed.env)
        end = parsed.offset(parsed.start_line(cut))
        loose = _loose(parsed, index) if kind != "blockquote" else False
        closing = f"</{kind}>\n"
    elif kind == "table":
        end_line = parsed.end_line(index)
        header = parsed.text[parsed.lines[start] : parsed.lines[start + 2]]
        if len(header) > MAX_TABLE_HEADER:
            return None
        html = render_tokens(parsed.tokens[index : close + 1], parsed.env)
        end = parsed.offset(end_line)
        body = end_line - start > 2
        closing = "</tbody>\n</table>\n" if body else "</table>\n"
        opened = OpenBlock("table", closing, header=header, body=body)
        return Step(length=end - begin, opening=html, opened=opened)
    elif kind == "p":
        cut_line = _paragraph_cut(parsed, index)
        if cut_line is None:
            return None
        end = parsed.offset(cut_line)
        html = _render_text(parsed, parsed.text[parsed.prefix + begin : parsed.prefix + end])
        closing, loose = "</p>\n", False
    else:
        return None
    if not html.endswith(closing) or end <= begin:
        return None
    source = parsed.text[parsed.prefix + begin : parsed.prefix + end]
    opened = OpenBlock(kind, closing, loose=loose, source=source)  # type: ignore[arg-type]
    return Step(length=end - begin, opening=html, opened=opened)


def _last_child(parsed: _Parsed, index: int, close: int) -> int | None:
    """The token opening the last child of the list or quote at `index`, if it has two."""
    level = parsed.tokens[index].level + 1
    children = [
        i
        for i in range(index + 1, close)
        if parsed.tokens[i].level == level
        and parsed.tokens[i].map
        and parsed.tokens[i].nesting >= 0
    ]
    return children[-1] if len(children) >= 2 else None


def _paragraph_cut(parsed: _Parsed, index: int) -> int | None:
    """The line before which a long paragraph may be cut: its last, when the lines before it
    hold no inline markup left open (a code span, emphasis) and end in no hard break."""
    start, end = parsed.tokens[index].map or (0, 0)
    if end - start < PARAGRAPH_CUT_LINES:
        return None
    before = parsed.text[parsed.lines[start] : parsed.lines[end - 1]]
    if before.count("`") % 2 or before.count("*") % 2 or before.count("_") % 2:
        return None
    if before.rstrip("\r\n").endswith(("  ", "\\")) or "[" in before:
        return None
    alone = parse_blocks(parsed.text[parsed.lines[end - 1] :])
    if not alone or alone[0].type != "paragraph_open" or alone[0].map != [0, 1]:
        return None  # the last line would read as something else on its own
    return end - 1


def _continue(parsed: _Parsed, context: OpenBlock, final: bool) -> Step:
    """The tail's first block continues the open list, quote or paragraph."""
    first = parsed.blocks[0]
    close = parsed.close(first)
    kind = context.kind
    more = len(parsed.blocks) > 1
    if more or final:
        # It ended: all of it joins, up to the next block.
        end_line = parsed.start_line(parsed.blocks[1]) if more else len(parsed.lines)
        joined = _children(parsed, first, close, None, kind)
        length = parsed.offset(end_line)
        tail = _rest(parsed, 1, final) if more else Step()
        length = max(length, tail.length)  # `_rest` counts from the tail's start too
        return replace(tail, length=length, join=kind, joined=joined, continues=False)
    if kind == "p":
        cut_line = _paragraph_cut(parsed, first)
        if cut_line is None:
            return Step(opened=context)
        end = parsed.offset(cut_line)
        html = _render_text(parsed, parsed.text[:end])
        if not html.startswith("<p>") or not html.endswith("</p>\n"):
            return Step(opened=context)
        opened = replace(context, source=context.source + parsed.text[:end])
        return Step(length=end, join="p", joined="\n" + html[3:-5], continues=True, opened=opened)
    cut = _last_child(parsed, first, close)
    if cut is None:
        return Step(opened=context)
    end = parsed.offset(parsed.start_line(cut))
    joined = _children(parsed, first, close, cut, kind)
    opened = replace(context, source=context.source + parsed.text[:end])
    return Step(length=end, join=kind, joined=joined, continues=True, opened=opened)


def _children(parsed: _Parsed, index: int, close: int, cut: int | None, kind: str) -> str:
    """The HTML of the block's children up to `cut` (all if None), as they go into its element."""
    if kind == "p":
        html = render_tokens(parsed.tokens[index : close + 1], parsed.env)
        return "\n" + html.removeprefix("<p>").removesuffix("</p>\n")
    return render_tokens(parsed.tokens[index + 1 : close if cut is None else cut], parsed.env, kind)


def _continue_table(parsed: _Parsed, context: OpenBlock, final: bool) -> Step:
    """The tail's first lines are rows of the open table (parsed under its header)."""
    first = parsed.blocks[0]
    close = parsed.close(first)
    rows = [
        i
        for i in range(first, close)
        if parsed.tokens[i].type == "tr_open" and parsed.start_line(i) >= 2
    ]
    end_line = parsed.end_line(first)
    html = render_tokens(
        [t for i in rows for t in parsed.tokens[i : parsed.close(i) + 1]], parsed.env, "tbody"
    )
    joined = html if context.body else "<tbody>\n" + html
    closing = "</tbody>\n</table>\n"
    length = parsed.offset(end_line)
    opened = replace(context, closing=closing, body=True)
    more = len(parsed.blocks) > 1
    if not (more or final):
        join: Join = "tbody" if context.body else "table"
        return Step(length=length, join=join, joined=joined, continues=True, opened=opened)
    # The table ended: the rest is parsed on its own (the header is no part of it).
    rest_text = parsed.text[
        parsed.lines[end_line] if end_line < len(parsed.lines) else len(parsed.text) :
    ]
    tail = _rest(_parse(rest_text, "", parsed.env.get("citations") or (), _doc(parsed)), 0, final)
    return replace(
        tail,
        length=length + tail.length,
        join="tbody" if context.body else "table",
        joined=joined,
        continues=False,
    )


def _doc(parsed: _Parsed) -> str:
    doc_id = parsed.env.get("docId")
    return doc_id if isinstance(doc_id, str) else ""


def _render_text(parsed: _Parsed, text: str) -> str:
    citations = parsed.env.get("citations") or ()
    return render_markdown(text, citations, doc_id=_doc(parsed))


def _replace(parsed: _Parsed, context: OpenBlock, final: bool) -> Step:
    """The open block rendered again from its source and the tail, in place of its element."""
    first = parsed.blocks[0]
    more = len(parsed.blocks) > 1
    if more or final or _cannot_grow(parsed.tokens[first], parsed.lines, parsed.text):
        close = parsed.close(first)
        end_line = parsed.start_line(parsed.blocks[1]) if more else len(parsed.lines)
        joined = render_tokens(parsed.tokens[first : close + 1], parsed.env)
        tail = _rest(parsed, 1, final) if more else Step()
        length = max(parsed.offset(end_line), tail.length)  # `_rest` counts from the start too
        return replace(tail, length=length, join="=", joined=joined)
    inside = _open_inside(parsed, first)
    if inside is None or inside.opened is None or inside.length < len(context.source):
        # It cannot be cut where it was: what settled of it, on its own, and no block open.
        return Step(join="=", joined=_render_text(parsed, context.source))
    return Step(
        length=inside.length - len(context.source),
        join="=",
        joined=inside.opening,
        continues=True,
        opened=inside.opened,
    )


# --- The settler (on the server's loop) -----------------------------------------------------------

type Runner = Callable[..., Awaitable[object]]


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
        return any(_closes(line, self.marker) for line in _LINE_BREAK.split(tail[start:end]))


class BlockSettler:
    """Feeds on an answer's content as it arrives; gives each newly settled chunk's HTML once.

    `feed` only appends; a parse of the tail runs in the render pool (`run`, by default
    `render_pool.run`) while the stream goes on, and `ready` hands out what it settled, so a
    slow render delays the blocks, never the text. `finish` settles the rest.
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
        if not self._tail:
            return None
        result = await self._job(final=True, restyle=self._restyle)
        if isinstance(result, Step) and result.restyle:
            result = await self._job(final=True, restyle=True)
        return self._apply(result, final=True)

    def _due(self) -> bool:
        complete = self._tail.rfind("\n") + 1
        if complete <= self._asked:
            return False  # no new complete line
        if self._restyle:
            return True
        if self._fence is not None and not self._fence.may_close(self._tail):
            self._asked = complete
            return False
        return complete < FREE_TAIL or complete >= self._parse_at

    def _start(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # a fold outside the server (a test's): nothing settles before `finish`
        self._asked = self._tail.rfind("\n") + 1
        restyle, self._restyle = self._restyle, False
        self._task = asyncio.ensure_future(self._job(final=False, restyle=restyle))

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

    def _take(self, step: Step) -> SettledChunk | None:
        pieces = self._pieces
        closed = self._open.closing if self._open is not None else ""
        if step.join == "=":
            del pieces[self._open_at :]
            kept = step.joined
            if step.continues and step.opened is not None:
                kept = kept.removesuffix(step.opened.closing)
            pieces.append(kept)
        elif step.join:
            pieces.append(step.joined)
            if not step.continues:  # a table's first rows came with their `<tbody>`
                pieces.append("</tbody>\n" + closed if step.join == "table" else closed)
        elif self._open is not None:
            pieces.append(closed)  # it ended, nothing more joined
        if step.rest:
            pieces.append(step.rest)
        if step.opening and step.opened is not None:
            self._open_at = len(pieces)
            pieces.append(step.opening.removesuffix(step.opened.closing))
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
