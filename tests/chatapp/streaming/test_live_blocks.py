"""Block settling over every split point of a markdown corpus.

What is settled never changes: at every prefix of an answer, the rendered settled part is the
start of the whole answer's render, and the chunks a stream settles join up (as the browser joins
them: a list's items into its list) to exactly that render. (Markdown that reaches across blocks,
a reference link or footnote defined further down, is the documented exception and not in this
corpus.) The settler's parses run here in-process (`direct`); `test_render_pool.py` runs them in
the pool's processes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chatapp.messaging.socket_messages import MAX_SETTLED_HTML
from chatapp.rendering.markdown import PLAIN_TEXT_NOTES, TOO_DEEP_NOTE, render_markdown
from chatapp.rendering.settle_steps import (
    _FENCE_START,
    MARKUP,
    completed_line,
    formula_start,
    settle_and_draft,
    settle_step,
    utf16_length,
)
from chatapp.streaming.live_blocks import BlockSettler, SettledChunk

CORPUS = {
    "headings and paragraphs": (
        "# Title\n\nA first paragraph\nthat wraps.\n\n## Part two\n\nSecond *paragraph*.\n"
    ),
    "setext headings": "Title\n=====\n\nSub\n---\n\npara one\npara two\n---\n\nend\n",
    "hr or setext": "para\n\n---\n\n***\nafter\n",
    "backtick fence": "Code:\n\n```python\ndef f():\n    return 1\n```\n\nAfter the code.\n",
    "tilde fence with backticks inside": "~~~\n```\nnot a fence\n```\n~~~~\ntext\n",
    "longer closing fence": "````js\nlet a = 1;\n```\nstill code\n`````\n\ndone\n",
    "fence that never closes": "Start.\n\n```sh\necho one\necho two\n\nstill code\n",
    "fence after blank lines, closers that do not close": (
        "\n\n```\n~~~\n``\n  ```not\n    ```\n```\nout\n"
    ),
    "fence right after a paragraph": "Look:\n```\nx = 1\n```\nand then.\n",
    "indented code": "para\n\n    indented code\n\n    more code\n\nback\n",
    "tight list": "- one\n- two\n- three\n\nafter\n",
    "loose list": "- one\n\n- two\n\n- three\n\nafter\n",
    "nested list": "1. first\n   - inner a\n   - inner b\n2. second\n\n   continued\n3. third\n",
    "ordered start": "3. three\n4. four\n\ntext\n\n7) seven\n",
    "list then code in item": "- item\n\n  ```\n  code in item\n  ```\n- next\n\nend\n",
    "task list": "- [ ] todo\n- [x] done\n\nok\n",
    "table": "| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n\nBelow.\n",
    "table after paragraph": "Intro\n| a | b |\n| - | - |\n| 1 | 2 |\nlazy row?\n\nend\n",
    "nested quotes": "> outer\n> > inner\n> > more\n> back out\nlazy line\n\n> again\n\nend\n",
    "quote with list": "> - a\n> - b\n>\n> para\n\nafter\n",
    "crlf lines": "# T\r\n\r\npara one\r\npara two\r\n\r\n- x\r\n- y\r\n\r\nend\r\n",
    "emoji and wide characters": "# 🎉 Party\n\n😀 smile 𝄞 clef\n\n- 🍎\n- 🍌\n\n终\n",
    "escapes and html": "<script>alert(1)</script>\n\n\\# not a heading\n\n<b>bold?</b>\n",
    "blank lines first": "\n\n\nfirst after blanks\n\n\nsecond\n",
    "no final newline": "para one\n\npara two without newline",
    "hash tag line": "para\n#tag\n#\n\n# real\n",
    "long list": "".join(f"- item {n}\n" for n in range(30)) + "\nafter\n",
    "list that turns loose": "- a\n- b\n\n- c\n- d\n\nend\n",
    "long table": "| a | b |\n|---|---|\n"
    + "".join(f"| {n} | x |\n" for n in range(12))
    + "\nend\n",
    "header-only table then rows": "| h |\n|---|\n\n| h |\n|---|\n| 1 |\n",
    "quote of blocks": "> p1\n>\n> p2\n>\n> - x\n> - y\n>\n> p3\n\nafter\n",
    "deeply nested": (
        "> > > - a\n> > >   - b\n> > >     > c\n> > > - d\n\n1. x\n   1. y\n      1. z\n"
    ),
    "lists nested past the parser's depth": (
        "".join(f"{'  ' * n}- level {n}\n" for n in range(20)) + "- back out\n\nafter\n"
    ),
    "quotes nested past the parser's depth": (
        "".join(f"{'>' * (n + 1)} level {n}\n" for n in range(20)) + "\nafter\n"
    ),
    "long paragraph": "".join(f"line {n} of it\n" for n in range(20)) + "\nnext\n",
    "long paragraph that turns setext": "".join(f"line {n}\n" for n in range(10)) + "===\n\nx\n",
    "long task list": "".join(f"- [{' x'[n % 2]}] task {n}\n" for n in range(25)) + "\ndone\n",
    "formulas": (
        "Euler: $e^{i\\pi} + 1 = 0$, and it costs $5 and $10.\n\n"
        "So:\n$$\n\\frac{a}{b} = \\sqrt{x^2}\n$$\nthen \\(x_1\\) and\n\\[\n\\sum_{i=1}^n i\n\\]\n\n"
        "- item $a^2$\n- bad $\\frac{$\n\n| $x$ | y |\n|---|---|\n| $\\alpha$ | 2 |\n\nend\n"
    ),
    "long paragraph with a formula across lines": (
        "".join(f"line {n} of it\n" for n in range(9))
        + "a $x +\ny$ b\n$$\nz\n$$\n"
        + "".join(f"more {n}\n" for n in range(9))
        + "\\(p +\nq\\)\n\nnext\n"
    ),
    "long paragraph ending in a display formula": (
        "".join(f"line {n} of it\n" for n in range(9))
        + "\\[\na +\nb\n\\]\n"
        + "".join(f"then {n}\n" for n in range(9))
        + "so $$x$$ and $y\n$ end\n\nnext\n"
    ),
}


async def direct(function: Callable[..., Any], *args: object) -> object:
    """The render pool's `run`, in this process."""
    return function(*args)


def settle(pieces: Iterable[str], **kwargs: Any) -> tuple[BlockSettler, list[SettledChunk]]:
    """Stream `pieces` through a settler, as the worker does: each piece, then what settled."""

    async def run() -> tuple[BlockSettler, list[SettledChunk]]:
        settler = BlockSettler(run=direct, **kwargs)
        chunks = []
        for piece in pieces:
            settler.feed(piece)
            chunk = await settler.step()
            chunks += [chunk] if chunk is not None else []
        chunk = await settler.finish()
        return settler, [*chunks, *([chunk] if chunk is not None else [])]

    return asyncio.run(run())


@pytest.mark.parametrize("name", CORPUS)
def test_chunks_split_anywhere_join_to_the_whole_render(name: str) -> None:
    text = CORPUS[name]
    whole = render_markdown(text)
    for split in range(0, len(text) + 1, 1 if len(text) < 200 else 7):
        settler, found = settle([text[:split], text[split:]])
        assert settler.html == whole, split
        assert [chunk.start for chunk in found] == [0, *(chunk.end for chunk in found[:-1])]
        assert found[-1].end == utf16_length(text)


@pytest.mark.parametrize("name", CORPUS)
def test_a_character_at_a_time_each_piece_is_rendered_once(name: str) -> None:
    text = CORPUS[name]
    settler, found = settle(text)
    assert settler.html == render_markdown(text)
    for chunk in found:
        assert chunk.html or chunk.join == "p", "an empty chunk is never sent"


@pytest.mark.parametrize("name", CORPUS)
def test_a_line_at_a_time_the_open_block_settles_piece_by_piece(name: str) -> None:
    text = CORPUS[name]
    settler, _found = settle(text.splitlines(keepends=True))
    assert settler.html == render_markdown(text)


def test_what_is_nested_past_the_parsers_depth_streams_as_text_under_a_note() -> None:
    text = "".join(f"{'  ' * n}- word{n}\n" for n in range(20)) + "\nafter\n"
    settler, _found = settle(text.splitlines(keepends=True))
    assert TOO_DEEP_NOTE in settler.html
    for word in [*(f"word{n}" for n in range(20)), "after"]:
        assert word in settler.html, word


def test_a_list_settles_item_by_item_into_one_list() -> None:
    settler, found = settle(["- one\n", "- two\n", "- three\n", "\nafter\n"])
    assert [chunk.to_wire() for chunk in found] == [
        [0, 6, "<ul>\n<li>one</li>\n</ul>\n"],
        [6, 12, "<li>two</li>\n", "ul", 13],
        [12, 21, "<li>three</li>\n", "ul", 15],
        [21, 27, "<p>after</p>\n"],
    ]
    assert settler.html == render_markdown("- one\n- two\n- three\n\nafter\n")


def test_a_table_settles_its_header_then_row_by_row() -> None:
    lines = ["| a | b |\n", "|---|---|\n", "| 1 | 2 |\n", "| 3 | 4 |\n"]
    settler, found = settle(lines)
    wire = [chunk.to_wire() for chunk in found]
    assert wire[0][:2] == [0, 20]
    assert wire[0][2].endswith("</thead>\n</table>\n")
    assert wire[1][3:] == ["table", utf16_length(wire[1][2])]  # its first row opens the body
    assert wire[1][2].startswith("<tbody>\n<tr>\n<td>1</td>")
    assert wire[2][2].startswith("<tr>\n<td>3</td>")
    assert wire[2][3] == "tbody"
    assert settler.html == render_markdown("".join(lines))


def test_a_list_that_turns_loose_is_rendered_again_once() -> None:
    settler, found = settle(["- a\n", "- b\n", "\n", "- c\n", "- d\n"])
    assert [chunk.join for chunk in found].count("=") == 1
    assert settler.html == render_markdown("- a\n- b\n\n- c\n- d\n")
    assert "<p>a</p>" in settler.html


def test_settled_html_goes_through_the_sanitizer() -> None:
    _, found = settle(["[x](javascript:alert(1)) <img src=x onerror=alert(1)>\n\nnext\n"])
    html = found[0].html
    assert "href" not in html
    assert "<img" not in html
    assert "&lt;img" in html


def test_a_long_open_fence_is_not_parsed_again_for_each_line() -> None:
    lines = ["Intro.\n\n```python\n", *(f"x_{n} = {n}\n" for n in range(500)), "```\n"]
    settler, found = settle(lines)
    assert settler.parsed < 4 * len("".join(lines))
    assert found[-1].html.count("x_") == 500


def test_a_chunk_too_long_for_a_frame_settles_as_plain_text() -> None:
    """A highlighted code block's HTML is 3-5 times its source: one longer than a frame holds
    settles as its plain text (the final render draws it highlighted), and what follows still
    settles live (#45 point 5)."""
    code = "".join(f"x_{n} = {n}\n" for n in range(2000))
    lines = ["Intro.\n\n```python\n", *code.splitlines(keepends=True), "```\n", "\nAfter.\n\n"]
    settler, found = settle(lines)
    assert len(render_markdown(f"```python\n{code}```\n")) > MAX_SETTLED_HTML
    assert all(len(chunk.html) <= MAX_SETTLED_HTML for chunk in found)
    plain = [chunk for chunk in found if PLAIN_TEXT_NOTES["streaming"] in chunk.html]
    assert len(plain) == 1
    assert plain[0].html.count("x_") == 2000
    assert found[-1].html == "<p>After.</p>\n"
    assert settler.settled == utf16_length("".join(lines))


def test_a_block_too_long_even_as_text_is_not_settled_live() -> None:
    """A paragraph longer than a frame holds is not settled, nor what follows it (its text
    shows as it arrived until the final render); no chunk goes out longer than a frame."""
    lines = ["Intro.\n\n", "Next.\n", "word " * 14_000, "\n\nAfter *it*.\n\n", "- a\n- b\n"]
    settler, found = settle(lines)
    assert [chunk.html for chunk in found] == ["<p>Intro.</p>\n"]
    assert settler.settled == len("Intro.\n\n")
    assert settler.draft is None
    assert settler.html == "<p>Intro.</p>\n"


def test_a_code_block_of_a_few_hundred_lines_settles_highlighted() -> None:
    """Its HTML is longer than a frame's text but within the settled bound: highlighted live,
    not shown as plain text until the end."""
    code = "".join(f"x_{n} = {n}\n" for n in range(400))
    lines = ["Intro.\n\n```python\n", *code.splitlines(keepends=True), "```\n", "\nAfter.\n\n"]
    _, found = settle(lines)
    assert not any(PLAIN_TEXT_NOTES["streaming"] in chunk.html for chunk in found)
    assert any(chunk.html.count("x_") == 400 for chunk in found)


def test_a_draft_too_long_for_a_frame_is_not_sent() -> None:
    """A short tail can still draw long HTML (`&` is `&amp;`): no draft of it goes out."""
    found = drafts(["**bold** ", "&" * 3900])
    assert found[0].drafted
    assert not found[-1].drafted
    assert found[-1].html == ""


@dataclass(frozen=True)
class Shown:
    """What the page shows after a step: the content so far, its unsettled tail, the settled
    HTML with the draft joined in, and whether a draft covers the whole tail."""

    content: str
    tail: str
    as_text: str  # what shows as text: the content after the draft (or the settled part)
    html: str
    written: str  # the content with its last line completed as the draft completes it
    drafted: bool
    in_fence: bool
    in_formula: bool  # the tail opens a formula not closed yet: the draft stops before it
    restyles: bool  # the tail turns the open block into another (a loose list): it is redone


def drafts(pieces: Iterable[str]) -> list[Shown]:
    """Stream `pieces` through a settler whose every step may draft (a second apart)."""

    async def run() -> list[Shown]:
        settler = BlockSettler(run=direct)
        shown = []
        content = ""
        for n, piece in enumerate(pieces):
            settler.feed(piece)
            content += piece
            await settler.step()
            settler.poll(float(n))  # a draft-only parse, when one is due
            while settler._task is not None:
                await asyncio.wait([settler._task])
                settler.ready()
            settler.take_draft()
            draft = settler.draft
            drafted = draft is not None and draft.end == utf16_length(content)
            shown_to = draft.end if draft is not None else settler.settled
            as_text = content.encode("utf-16-le")[2 * shown_to :].decode("utf-16-le")
            line = content[: len(content) - len(as_text)].rsplit("\n", 1)[-1]
            as_text = line + as_text  # from its line's start: a marker starts a line
            tail = settler._tail
            restyles = settle_step(tail, settler._open, [], "", final=True).restyle
            in_fence = settler._fence is not None or len(_FENCE_START.findall(tail)) % 2 == 1
            in_table = settler._open is not None and settler._open.kind == "table"
            written = content[: len(content) - len(tail)] + completed_line(tail, in_table)
            shown.append(
                Shown(
                    content,
                    tail,
                    as_text,
                    settler.drafted_html,
                    written,
                    drafted,
                    in_fence,
                    formula_start(tail) is not None,
                    restyles,
                )
            )
        return shown

    return asyncio.run(run())


@pytest.mark.parametrize("name", CORPUS)
def test_the_draft_at_every_point_is_the_render_of_the_text_so_far(name: str) -> None:
    """The draft is the one renderer's own output: the settled blocks with the draft joined in
    are exactly the final render of the answer so far, its last line completed as it most
    likely ends (a code span or strong emphasis closed, a first table row given the line under
    it: `completed_line`). Without a draft, the unsettled text
    after the draft shown holds no markup (it shows as itself), is an open fence (shown as code
    until it closes), opens a formula (its source shows as written until it closes), or
    turns the open block into another (its next parse renders the block again)."""
    text = CORPUS[name]
    step = 1 if len(text) < 200 else 5
    pieces = [text[i : i + step] for i in range(0, len(text), step)]
    found = drafts(pieces)
    for shown in found:
        if shown.drafted:
            assert shown.html == render_markdown(shown.written), shown
        else:
            # Text after a draft runs on in its last block until the next draft takes it in,
            # which comes once the text since holds markup (or with the next settled line).
            assert (
                shown.in_fence
                or shown.in_formula
                or shown.restyles
                or not MARKUP.search(shown.as_text)
            ), shown
    markup = [shown for shown in found if MARKUP.search(shown.tail) and not shown.restyles]
    assert any(shown.drafted for shown in found) or not markup


def test_a_draft_no_longer_true_is_withdrawn_once() -> None:
    async def run(pieces: list[str]) -> list[tuple[bool, SettledChunk | None]]:
        settler = BlockSettler(run=direct)
        taken = []
        for n, piece in enumerate(pieces):
            settler.feed(piece)
            await settler.step()
            settler.poll(float(n))
            while settler._task is not None:
                await asyncio.wait([settler._task])
                settler.ready()
            taken.append(settler.take_draft())
        return taken

    drafted, fence, later = asyncio.run(run(["Say `hi`\n\n``", "`py", "thon"]))
    assert drafted[0]
    assert drafted[1] is not None
    assert drafted[1].html == "<p>Say <code>hi</code></p>\n<p>``</p>\n"
    # Three backticks open a fence: the browser shows it as code itself, so the draft goes.
    assert fence == (True, None)
    assert later == (False, None)
    # A settle takes the draft's place in the browser by itself: no withdrawal is sent.
    drafted, settled = asyncio.run(run(["- a\n- b\n- **c**", "\n\n- d"]))
    assert drafted[1] is not None
    assert drafted[1].html.endswith("<li><strong>c</strong></li>\n")
    assert settled == (False, None)


@pytest.mark.parametrize(
    ("tail", "in_table", "completed"),
    [
        ("We need **pea", False, "We need **pea**"),
        ("see `cart.p", False, "see `cart.p`"),
        ("a **b** and `c` done", False, "a **b** and `c` done"),
        ("ends on a marker **", False, "ends on a marker **"),
        ("| fruit | kg |", False, "| fruit | kg |\n|---|---|"),
        ("Intro\n\n| fruit | k", False, "Intro\n\n| fruit | k\n|---|---|"),
        ("| 1 | 2", True, "| 1 | 2"),  # a row of the open table: its header is above it
        ("| fruit", False, "| fruit\n|---|"),  # its first cell, as it is written
        ("| fruit | price |\n", False, "| fruit | price |\n|---|---|"),  # the rule to come
        ("| fruit | price |\n|:-", False, "| fruit | price |\n|:-|---|"),
        ("| fruit | price |\n|---|--:", False, "| fruit | price |\n|---|--:|"),  # not a row
        ("| a | b |\n|---|---|\n| ap", False, "| a | b |\n|---|---|\n| ap"),  # a row of it
        ("| a | b |\n|---|---|\n| x |\n", False, "| a | b |\n|---|---|\n| x |\n"),
        ("**bold** first\nthen `code", False, "**bold** first\nthen `code`"),
        ("plain words", False, "plain words"),
    ],
)
def test_a_draft_completes_the_line_being_written(
    tail: str, in_table: bool, completed: str
) -> None:
    assert completed_line(tail, in_table) == completed


VECTORS = Path(__file__).parents[2] / "vectors" / "drafts" / "tables_and_formulas.json"


@pytest.mark.parametrize(
    "vector", json.loads(VECTORS.read_text())["cases"], ids=lambda vector: vector["about"]
)
def test_a_draft_of_a_table_or_formula_shows_what_the_page_builds_on(
    vector: dict[str, Any],
) -> None:
    """The server's half of the shared vectors (tests/js/tail_text.test.mjs has the page's): a
    draft-only parse of `drafted` covers `covers` characters of it and shows `shows`. A table
    is one row of its cells from the header's first (never a paragraph of pipes, nor the rule
    as a row); an open formula is left out of the draft, its `\\,` kept as written."""
    settling = settle_and_draft("", vector["drafted"], None, [], "")
    assert settling.draft is not None
    assert settling.drafted == vector["covers"]
    assert settling.draft.html == vector["shows"]


def test_a_display_formula_is_drawn_as_soon_as_it_closes() -> None:
    text = "So:\n$$\nx = a\\,b\n$$"
    found = drafts(list(text))
    for shown in found[:-1]:
        assert "math" not in shown.html, shown  # its source shows as written meanwhile
        assert "a,b" not in shown.html, shown
    assert '<div class="math-block"><math display="block">' in found[-1].html
    assert found[-1].drafted


def test_drafts_of_hostile_markup_are_sanitized_at_every_point() -> None:
    """The security suite's injections, streamed a character at a time: every draft the page
    could show is the sanitizer's output (it changes nothing more), with nothing that runs."""
    from chatapp.rendering.markdown import sanitize
    from tests.security.scripted_gateway import INJECTIONS

    text = "".join(INJECTIONS["inject-html"]) + "\n\n- [x] <img src=x onerror=alert(1)>\n| a |"
    found = drafts(list(text))
    assert any(shown.drafted for shown in found)
    for shown in found:
        assert sanitize(shown.html) == shown.html, shown.content
        assert _runnable(shown.html) == [], shown.content


def _runnable(html: str) -> list[str]:
    """The elements and attributes of `html` that could run something."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in ("script", "iframe", "svg", "object", "embed", "style"):
                found.append(tag)
            for name, value in attrs:
                if name.startswith("on") or "javascript:" in (value or "").lower():
                    found.append(f"{tag} {name}")

    Parser().feed(html)
    return found


@pytest.mark.parametrize(
    ("text", "opened"),
    [
        ("So:\n$$\nx = a\\,b", 4),
        ("So:\n$$\nx\n$$\n", None),  # closed
        ("a $$x$$ and $$y", 12),
        ("Use `$$` for display math", None),  # in code: text
        ("see \\(a\\,b", 4),
        ("see \\(a\\) then \\[b", 15),
        ("costs \\$$5", None),  # an escaped dollar
    ],
)
def test_a_draft_stops_where_a_formula_opens_that_is_not_closed(
    text: str, opened: int | None
) -> None:
    assert formula_start(text) == opened


@pytest.mark.timeout(10)
def test_a_long_tail_of_code_spans_and_dollars_is_read_in_one_pass() -> None:
    # Each `$$` was looked for in every code span: 210,000 characters of these took minutes,
    # for every tick's draft of the answer.
    assert formula_start("`a` $$ " * 30_000) is None
    assert formula_start("`a` $$ " * 30_000 + "$$x") == 7 * 30_000


def test_a_mermaid_block_settles_with_its_hook_only_once_its_fence_closes() -> None:
    """The page draws a diagram from a settled block (`data-diagram`, static/chatapp/diagrams.js):
    while its fence is open, nothing settled or drafted carries the hook."""
    lines = ["A diagram:\n\n", "```mermaid\n", "flowchart LR\n", "  A --> B\n", "```\n", "After."]

    async def run() -> list[bool]:
        settler = BlockSettler(run=direct)
        hooked = []
        for line in lines:
            settler.feed(line)
            await settler.step()
            hooked.append('data-diagram="mermaid"' in settler.html)
        return hooked

    assert asyncio.run(run()) == [False, False, False, False, True, True]
    assert not any("data-diagram" in step.html for step in drafts(lines[:4]))
