"""A streaming answer's markdown, rendered block by block as each block settles.

A top-level block is *settled* once nothing that can still arrive would change it: another
top-level block has started after it (outside any open fence), or it is one that cannot grow (a
closed fence, a heading, a thematic break). Only complete lines count: a half-written line may
still turn out to be something else (`#` is a heading, `#tag` is text). The worker renders each
settled chunk once, through the same `render_markdown` as the final render, and sends its HTML
once; the browser shows settled blocks as HTML and only the unsettled tail as text. Wire bytes
stay O(answer), no block is rendered twice, and the final render equals what was shown, except
where markdown reaches across blocks (a reference link or footnote defined further down): those
blocks change once, at the end.

Offsets sent to the browser count UTF-16 code units, as JavaScript strings do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from markdown_it.token import Token

from .rendering import parse_blocks, render_markdown

type Citations = Sequence[Mapping[str, object]]

_LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
# Top-level blocks that no later line can extend, once their lines are complete.
_FINAL_BLOCKS = frozenset({"heading_open", "hr"})


@dataclass(frozen=True, slots=True)
class SettledChunk:
    """The HTML of the answer's text from UTF-16 offset `start` to `end`."""

    start: int
    end: int
    html: str

    def to_wire(self) -> list[object]:
        return [self.start, self.end, self.html]


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def settled_length(text: str) -> int:
    """How many leading characters of `text` form settled blocks (0 if none)."""
    return _settle_point(text)[0]


def _settle_point(text: str) -> tuple[int, _OpenFence | None]:
    """`settled_length(text)`, and the fence left open after it, if the rest is one."""
    complete = text[: text.rfind("\n") + 1]
    if not complete:
        return 0, None
    blocks = [token for token in parse_blocks(complete) if token.level == 0 and token.map]
    if not blocks:
        return 0, None
    last = max(blocks, key=lambda token: token.map[0] if token.map else 0)
    assert last.map is not None
    start, end = last.map
    lines = _line_starts(complete)
    if _cannot_grow(last, lines, complete):
        return (lines[end] if end < len(lines) else len(complete)), None
    length = lines[start] if start < len(lines) else len(complete)
    if last.type != "fence" or start + 1 >= len(lines):
        return length, None
    return length, _OpenFence(last.markup, lines[start + 1])


def _line_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in _LINE_BREAK.finditer(text))]


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


def _closes(line: str, marker: str) -> bool:
    """Whether `line` closes a fence opened with `marker` (the same character, as many or more)."""
    found = _FENCE_LINE.match(line)
    fence = found.group(1) if found else ""
    return fence[:1] == marker[:1] and len(fence) >= len(marker)


class _OpenFence:
    """The unsettled tail is a fence still open: only a closing fence line can settle it, so new
    lines are checked for one instead of parsing the whole block again (a long code block made
    each delta's parse grow with it)."""

    __slots__ = ("checked", "marker")

    def __init__(self, marker: str, checked: int) -> None:
        self.marker = marker
        # How much of the tail has no closing fence in its complete lines: at first, up to the end
        # of the fence's opening line.
        self.checked = checked

    def may_close(self, tail: str) -> bool:
        end = tail.rfind("\n") + 1
        start = self.checked
        self.checked = max(start, end)
        return any(_closes(line, self.marker) for line in _LINE_BREAK.split(tail[start:end]))


class BlockSettler:
    """Feeds on an answer's content as it arrives; gives each newly settled chunk's HTML once."""

    __slots__ = ("_chunks", "_citations", "_doc_id", "_fence", "_settled", "_tail")

    def __init__(self, doc_id: str = "", citations: Callable[[], Citations] | None = None) -> None:
        """`doc_id` and `citations` (those known so far, asked for when a chunk is rendered) are
        what the final render is given (`rendering.render_markdown`)."""
        self._doc_id = doc_id
        self._citations = citations
        self._tail = ""  # the content after the settled part
        self._settled = 0  # UTF-16 length of the settled part
        self._chunks: list[str] = []
        self._fence: _OpenFence | None = None

    @property
    def settled(self) -> int:
        return self._settled

    @property
    def html(self) -> str:
        """Every settled chunk's HTML, in order: what a snapshot shows."""
        return "".join(self._chunks)

    def feed(self, text: str) -> SettledChunk | None:
        """Add `text` to the content; the chunk it settles, if any."""
        self._tail += text
        if "\n" not in text:
            return None  # nothing settles without a new complete line
        if self._fence is not None and not self._fence.may_close(self._tail):
            return None
        length, fence = _settle_point(self._tail)
        chunk = self._settle(length)
        if fence is not None and chunk is not None:
            fence.checked -= length  # the tail now starts where the settled part ended
        self._fence = fence
        return chunk

    def finish(self) -> SettledChunk | None:
        """Settle everything left: the answer has ended."""
        return self._settle(len(self._tail))

    def _settle(self, length: int) -> SettledChunk | None:
        if not length:
            return None
        chunk, rest = self._tail[:length], self._tail[length:]
        citations = self._citations() if self._citations is not None else None
        html = render_markdown(chunk, citations, doc_id=self._doc_id)
        if not html and rest:
            return None  # blank lines only: they stay with the next block
        self._tail = rest
        start = self._settled
        self._settled += utf16_length(chunk)
        self._chunks.append(html)
        return SettledChunk(start, self._settled, html)


@dataclass(frozen=True, slots=True)
class PartialAnswer:
    """What a page shows of an answer still streaming, before its live snapshot arrives: the
    settled part rendered (`html`, ending at UTF-16 offset `settled`), the rest as text."""

    html: str
    settled: int
    tail: str


def partial_answer(text: str, citations: Citations = (), doc_id: str = "") -> PartialAnswer:
    length = settled_length(text)
    html = render_markdown(text[:length], citations, doc_id=doc_id) if length else ""
    if not html:
        return PartialAnswer("", 0, text)
    return PartialAnswer(html, utf16_length(text[:length]), text[length:])
