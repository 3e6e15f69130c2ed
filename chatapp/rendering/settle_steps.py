"""One step of settling a streaming answer's markdown: what of the unsettled tail has settled.

`settle_step` is a pure function of its arguments, run in the render pool's processes
(`pool_jobs.settle`), never on the server's loop; `streaming.live_blocks.BlockSettler` asks for a
step as the answer arrives and keeps what lasts between steps (the settled HTML, and the
`OpenBlock` the settled part ends inside). The tail is parsed under that block's context and the
settled part rendered from that one parse, so a list's items render tight or loose as in the
whole; a piece inside the open block comes back as a join (`Step.join`), and a block that a later
line restyles is rendered again from its source (`Step.restyle`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from markdown_it.token import Token
from markdown_it.utils import EnvType

from chatapp.rendering.markdown import parse, parse_blocks, render_markdown, render_tokens

type Citations = Sequence[Mapping[str, object]]
type Join = Literal["", "ul", "ol", "blockquote", "p", "table", "tbody", "="]

LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
# Top-level blocks that no later line can extend, once their lines are complete.
_FINAL_BLOCKS = frozenset({"heading_open", "hr", "math_block"})  # a `$$` block is parsed closed
_LISTS = {"bullet_list_open": "ul", "ordered_list_open": "ol"}
PARAGRAPH_CUT_LINES = 8  # a paragraph's lines settle one by one once it has this many
MAX_TABLE_HEADER = 2_000  # characters; a table with a longer header settles whole


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
    return [0, *(match.end() for match in LINE_BREAK.finditer(text))]


def closes_fence(line: str, marker: str) -> bool:
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
    return closes_fence(closing.rstrip("\r\n"), token.markup)


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


@dataclass(frozen=True, slots=True)
class Settling:
    """A step, and the *draft*: what is still unsettled after it, rendered as the step would
    settle it if the answer ended now (browsers show it in place of that text until it settles).
    None when no draft was asked for, or none is worth showing (see `draft_step`)."""

    step: Step
    draft: Step | None = None
    drafted: int = 0  # characters of text the draft covers (from the end of `step`)


# Text that renders as more than itself: emphasis, code, links, headings, lists, tables, quotes,
# HTML, entities, escapes, breaks. A tail without any shows as itself, so it needs no draft.
_FENCE_START = re.compile(r"^ {0,3}(?:`{3,}|~{3,})", re.MULTILINE)
MARKUP = re.compile(r"[*_`#|<>\[\]!~=\\&$-]|^ {0,3}\d{1,9}[.)]|  $", re.MULTILINE)


def settle_and_draft(
    lines: str,
    rest: str | None,
    context: OpenBlock | None,
    citations: Citations,
    doc_id: str,
    restyle: bool = False,
) -> Settling:
    """`settle_step` of the tail's complete `lines`; with `rest` (the line still being written),
    the draft of everything it leaves unsettled, under the block it leaves open."""
    step = settle_step(lines, context, citations, doc_id, restyle=restyle)
    if rest is None or step.restyle or step.fence is not None:
        return Settling(step)  # an open fence shows as code the browser's way until it closes
    moved = bool(step.length or step.joined or step.ended)
    left = lines[step.length :] + rest if moved else lines + rest
    opened = formula_start(left)
    shown = left if opened is None else left[:opened]
    draft = draft_step(shown, step.opened if moved else context, citations, doc_id)
    return Settling(step, draft, len(shown) if draft is not None else 0)


# Where a formula opens: `$$` or `\[` (display), `\(` (inline), not after a backslash.
_DOLLARS = re.compile(r"(?<!\\)\$\$")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_FORMULA_OPENERS = (
    (_DOLLARS, _DOLLARS),
    (re.compile(r"(?<!\\)\\\["), re.compile(r"(?<!\\)\\\]")),
    (re.compile(r"(?<!\\)\\\("), re.compile(r"(?<!\\)\\\)")),
)


def formula_start(text: str) -> int | None:
    """Where in `text` a formula opens that is not closed yet, or None. A draft stops there: the
    formula's source shows as text as it is written (rendered half-written, its `\\,` would be
    an escaped comma, its LaTeX markdown), and is drawn as soon as it closes."""
    spans = [match.span() for match in _CODE_SPAN.finditer(text)]  # `$$` in code is text
    starts = [start for start, _ in spans]

    def in_code(at: int) -> bool:
        # The spans do not overlap and come in order: only the last one starting before `at`
        # can hold it (a scan of them all per opener made a tick's draft quadratic).
        index = bisect_left(starts, at) - 1
        return index >= 0 and at < spans[index][1]

    found = []
    for opener, closer in _FORMULA_OPENERS:
        opens = [match.start() for match in opener.finditer(text) if not in_code(match.start())]
        if opener is closer:
            if len(opens) % 2:
                found.append(opens[-1])
        elif opens and closer.search(text, opens[-1] + 2) is None:
            found.append(opens[-1])
    return min(found, default=None)


def draft_step(
    tail: str, context: OpenBlock | None, citations: Citations, doc_id: str
) -> Step | None:
    """`tail` (unsettled, after `context`) settled as if the answer ended now, its last line
    completed (`completed_line`); None when it holds no markup (its text shows as itself) or
    would restyle the block it continues."""
    if not tail.strip() or not MARKUP.search(tail):
        return None
    if len(_FENCE_START.findall(tail)) % 2:
        return None  # it opens a fence (the browser shows its code as code until it closes)
    in_table = context is not None and context.kind == "table"
    step = settle_step(completed_line(tail, in_table), context, citations, doc_id, final=True)
    return None if step.restyle or not (step.joined or step.rest) else step


# A table's header row as it is written (a pipe, then some text), and the line under it as far
# as it is written (pipes, dashes, colons).
_HEADER_ROW = re.compile(r"^ {0,3}\|.*[^\s|]")
_ROW_START = re.compile(r"^ {0,3}\|")
_DELIMITER_SO_FAR = re.compile(r"^ {0,3}\|?[ \t:|-]*$")
_DELIMITER_CELL = re.compile(r"^:?-+:?$")
_PIPE = re.compile(r"(?<!\\)\|")


def completed_line(tail: str, in_table: bool = False) -> str:
    """`tail` with the line still being written completed as it most likely ends, for a draft:
    a code span or strong emphasis left open is closed, and a table's header row (unless
    `in_table`: the tail continues a table) gets the line under it, completed as far as it is
    written, so that they show formatted while they are written rather than raw until their end
    arrives: a header shows as one row of its cells from its first, and stays one while the
    line under it is written. Only the draft sees this; what settles is the text as it came."""
    start = tail.rfind("\n") + 1
    line = tail[start:]
    header = None if in_table else _header_above(tail, start)
    if header is not None and _DELIMITER_SO_FAR.match(line):
        return tail[:start] + _delimiter(header, line)
    if not line.strip() or line.endswith(("*", "`")):
        return tail
    if line.count("`") % 2:
        return tail + "`"
    if line.count("**") % 2:
        return tail + "**"
    if not in_table and _HEADER_ROW.match(line) and not _row_above(tail, start):
        return tail + "\n" + _delimiter(line, "")
    return tail


def _row_above(tail: str, start: int) -> bool:
    """Whether the line before the one that starts at `start` is a table's row (or its rule)."""
    above = tail.rfind("\n", 0, max(start - 1, 0)) + 1
    return start > 0 and _ROW_START.match(tail[above : start - 1]) is not None


def _header_above(tail: str, start: int) -> str | None:
    """The line before the one that starts at `start`, when it is a table's header row: a row
    with no row above it."""
    if start == 0:
        return None
    above = tail.rfind("\n", 0, start - 1) + 1
    header = tail[above : start - 1].rstrip("\r")
    if not _HEADER_ROW.match(header) or _row_above(tail, above):
        return None
    return header


def _delimiter(header: str, written: str) -> str:
    """The line under `header`: one cell per header cell, each as `written` has it when it is
    one already (`:--`, `--:`), else `---`."""
    cells = _PIPE.split(header.strip().removeprefix("|"))
    if len(cells) > 1 and not cells[-1].strip():
        cells.pop()  # the row's closing pipe
    so_far = [cell.strip() for cell in written.strip().removeprefix("|").split("|")]
    kept = [
        so_far[i] if i < len(so_far) and _DELIMITER_CELL.match(so_far[i]) else "---"
        for i in range(len(cells))
    ]
    return "|" + "|".join(kept) + "|"


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
    hold no inline markup left open (a code span, emphasis) and end in no hard break. One with
    a formula anywhere is not cut: a formula may span lines, and `$$` may end the paragraph."""
    start, end = parsed.tokens[index].map or (0, 0)
    if end - start < PARAGRAPH_CUT_LINES:
        return None
    before = parsed.text[parsed.lines[start] : parsed.lines[end - 1]]
    if before.count("`") % 2 or before.count("*") % 2 or before.count("_") % 2:
        return None
    whole = parsed.text[parsed.lines[start] : parsed.offset(end) + parsed.prefix]
    if "$" in whole or "\\(" in whole:
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
