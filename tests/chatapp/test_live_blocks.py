"""Block settling over every split point of a markdown corpus.

What is settled never changes: at every prefix of an answer, the rendered settled part is the
start of the whole answer's render, and the chunks a stream settles join up to exactly that
render. (Markdown that reaches across blocks, a reference link or footnote defined further down,
is the documented exception and not in this corpus.)
"""

from __future__ import annotations

import pytest
from markdown_it.token import Token

from chatapp import live_blocks
from chatapp.live_blocks import BlockSettler, partial_answer, settled_length, utf16_length
from chatapp.rendering import render_markdown

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
}


def settled_text(text: str) -> str:
    return text[: settled_length(text)]


@pytest.mark.parametrize("name", CORPUS)
def test_what_is_settled_at_any_prefix_stays_as_rendered(name: str) -> None:
    text = CORPUS[name]
    whole = render_markdown(text)
    for end in range(len(text) + 1):
        settled = render_markdown(settled_text(text[:end]))
        assert whole.startswith(settled), (end, text[:end])


@pytest.mark.parametrize("name", CORPUS)
def test_chunks_split_anywhere_join_to_the_whole_render(name: str) -> None:
    text = CORPUS[name]
    whole = render_markdown(text)
    for split in range(len(text) + 1):
        settler = BlockSettler()
        chunks = [settler.feed(text[:split]), settler.feed(text[split:]), settler.finish()]
        found = [chunk for chunk in chunks if chunk is not None]
        assert "".join(chunk.html for chunk in found) == whole, split
        assert [chunk.start for chunk in found] == [0, *(chunk.end for chunk in found[:-1])]
        assert found[-1].end == utf16_length(text)


@pytest.mark.parametrize("name", CORPUS)
def test_a_character_at_a_time_each_block_is_rendered_once(name: str) -> None:
    text = CORPUS[name]
    settler = BlockSettler()
    chunks = [settler.feed(char) for char in text]
    chunks.append(settler.finish())
    found = [chunk for chunk in chunks if chunk is not None]
    assert "".join(chunk.html for chunk in found) == render_markdown(text)
    assert settler.html == render_markdown(text)
    for chunk in found:
        assert chunk.html, "an empty chunk is never sent"


def test_blocks_settle_when_the_next_one_starts_or_when_they_cannot_grow() -> None:
    assert settled_text("para\n\nnext") == ""  # the next line is not complete
    assert settled_text("para\n\nnext\n") == "para\n\n"
    assert settled_text("# Heading\n") == "# Heading\n"
    assert settled_text("# Heading") == ""
    assert settled_text("```py\nx = 1\n```\n") == "```py\nx = 1\n```\n"
    assert settled_text("```py\nx = 1\n``") == ""
    assert settled_text("```py\nx = 1\n\n\nmore\n") == ""  # an open fence swallows blank lines
    assert settled_text("- a\n- b\n") == ""  # a list can grow
    assert settled_text("---\n") == "---\n"


def test_a_partial_answer_renders_its_settled_part_and_keeps_the_rest_as_text() -> None:
    text = "## Plan 😀\n\n- one\n- tw"
    partial = partial_answer(text)
    assert partial.html == render_markdown("## Plan 😀\n")
    assert partial.tail == "- one\n- tw"
    assert partial.settled == utf16_length("## Plan 😀\n\n")  # counted as JavaScript counts
    assert partial.settled == len("## Plan 😀\n\n") + 1
    assert partial_answer("plain text") == type(partial)("", 0, "plain text")


def test_settled_html_goes_through_the_sanitizer() -> None:
    settler = BlockSettler()
    chunk = settler.feed("[x](javascript:alert(1)) <img src=x onerror=alert(1)>\n\nnext\n")
    assert chunk is not None
    assert "href" not in chunk.html
    assert "<img" not in chunk.html
    assert "&lt;img" in chunk.html


def test_a_long_open_fence_is_not_parsed_again_for_each_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parses: list[str] = []
    parse = live_blocks.parse_blocks

    def counted(text: str) -> list[Token]:
        parses.append(text)
        return parse(text)

    monkeypatch.setattr(live_blocks, "parse_blocks", counted)
    settler = BlockSettler()
    settler.feed("Intro.\n\n```python\n")
    for n in range(500):
        assert settler.feed(f"x_{n} = {n}\n") is None
    assert len(parses) <= 2
    chunk = settler.feed("```\n")
    assert chunk is not None
    assert chunk.html.count("x_") == 500
