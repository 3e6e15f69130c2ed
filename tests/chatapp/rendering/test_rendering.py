"""Model output becomes markup only through markdown-it (HTML off) and nh3."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from chatapp.rendering.highlight import MAX_CODE_CHARS, lexer_name, stylesheet
from chatapp.rendering.markdown import (
    ALLOWED_TAGS,
    HTML_ALLOWANCE,
    MAX_HTML_RATIO,
    PLAIN_TEXT_NOTES,
    TOO_DEEP_NOTE,
    doc_id_for,
    render_markdown,
    sanitize,
)


class Elements(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt:alert(1))",
        "[click](vbscript:msgbox(1))",
        "[data](data:text/html;base64,PHNjcmlwdD4=)",
        "![svg](data:image/svg+xml;base64,PHN2Zz4=)",
        '<a href="https://ok.example" onclick="x()">a</a>',
        "<iframe src=https://evil.example></iframe>",
        "<style>body{display:none}</style>",
    ],
)
def test_nothing_executable_survives(text: str) -> None:
    for tag, attrs in Elements(render_markdown(text)).found:
        assert tag in ALLOWED_TAGS
        assert not any(name.startswith("on") or name == "style" for name in attrs)
        for name in ("href", "src"):
            url = (attrs.get(name) or "").lower()
            assert not url or url.startswith(("https://", "http://", "data:image/png"))


def test_markdown_renders_with_safe_links_and_raster_images() -> None:
    html = render_markdown(
        "# Title\n\n**b** `code` [x](https://e.example/a?b=1&c=2) ![i](data:image/png;base64,AAAA)"
        "\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )
    assert "<h1>Title</h1>" in html
    assert "<strong>b</strong>" in html
    assert "<code>code</code>" in html
    assert 'href="https://e.example/a?b=1&amp;c=2" target="_blank" rel="noopener nofollow"' in html
    assert '<img src="data:image/png;base64,AAAA" alt="i">' in html
    assert "<table>" in html


def test_relative_and_mailto_links_lose_their_target() -> None:
    html = render_markdown("[a](/admin/) [b](mailto:x@example.org)")
    assert "href" not in html
    assert ">a</a>" in html


def test_remote_markdown_image_becomes_a_link_never_an_img() -> None:
    html = render_markdown(
        "![chart](https://evil.example/leak.png?c=secret) "
        "![svg](data:image/svg+xml;base64,PHN2Zz4=)"
    )
    assert "<img" not in html
    assert '<a href="https://evil.example/leak.png?c=secret" target="_blank"' in html
    assert ">chart</a>" in html


# --- Code highlighting --------------------------------------------------------------------------


def code_of(html: str) -> str:
    """What a rendered code block holds inside its `<code>`."""
    return html.split("<code", 1)[1].split(">", 1)[1].split("</code>", 1)[0]


def test_code_in_a_known_language_is_highlighted_with_classes_only() -> None:
    html = render_markdown('```python\ndef f(x):\n    return "<script>"  # hi\n```')
    assert '<code class="language-python"><span class="k">def</span>' in html
    assert '<span class="nf">f</span>' in html
    assert '<span class="s2">"&lt;script&gt;"</span>' in html, "the code's text stays escaped"
    assert "style=" not in html, "colours come from classes (the CSP forbids inline style)"


@pytest.mark.parametrize("info", ["", "no-such-language", 'python" onclick="x'])
def test_code_in_another_or_no_language_stays_plain(info: str) -> None:
    html = render_markdown(f"```{info}\n<b>x</b> = 1\n```")
    assert "<span" not in code_of(html)
    assert "&lt;b&gt;x&lt;/b&gt; = 1" in html
    assert "onclick" not in html


def test_a_huge_code_block_is_left_plain() -> None:
    code = "x = 1\n" * (MAX_CODE_CHARS // 6 + 1)
    assert "<span" not in code_of(render_markdown(f"```python\n{code}```"))


def test_model_text_cannot_forge_token_spans() -> None:
    html = render_markdown('<span class="k">forged</span> and `<span class="k">x</span>`')
    assert "<span" not in html


def test_the_stylesheet_is_the_generated_one() -> None:
    path = Path(__file__).resolve().parents[3] / "static" / "chatapp" / "highlight.css"
    assert path.read_text() == stylesheet(), (
        "regenerate with chatapp.rendering.highlight.stylesheet()"
    )


def test_table_columns_keep_their_alignment_as_classes() -> None:
    html = render_markdown("| a | b | c | d |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |")
    assert '<th class="align-left">a</th>' in html
    assert '<th class="align-center">b</th>' in html
    assert '<td class="align-right">3</td>' in html
    assert "<td>4</td>" in html
    assert "style" not in html


# --- Code blocks' head, task lists, footnotes, citation markers -----------------------------------

CITED = [
    {"url": "https://one.example/a?b=1&c=2", "title": "One"},
    {"url": "javascript:alert(1)", "title": "Script"},
    {"url": None, "title": "No link"},
    {"url": "https://four.example/", "title": '"><script>alert(4)</script>'},
]


def test_a_code_block_has_a_head_with_its_language_and_a_copy_button() -> None:
    html = render_markdown("```python\ndef f(x):\n    return x\n```")
    assert html.startswith(
        '<div class="code-block"><div class="code-head"><span class="code-lang">python</span>'
        '<button class="copy-code" type="button">Copy</button></div>'
        '<pre tabindex="0" aria-label="python code">'
        '<code class="language-python"><span class="k">def</span>'
    ), "the first line starts right after <code>, level with the next"
    assert html.endswith("</code></pre></div>\n")


def test_a_code_block_scrolls_by_keyboard_but_a_written_pre_gains_no_focus() -> None:
    """A block wider than the answer scrolls sideways: its `<pre>` takes the focus, named."""
    html = render_markdown("```\nplain\n```")
    assert '<pre tabindex="0" aria-label="Code"><code>' in html
    nested = render_markdown("- item\n\n  ```sh\n  ls\n  ```")
    assert '<pre tabindex="0" aria-label="sh code">' in nested
    assert "<pre" not in render_markdown('<pre tabindex="5" aria-label="x">hi</pre>')
    assert sanitize('<pre tabindex="5">hi</pre>') == "<pre>hi</pre>"


@pytest.mark.parametrize("text", ["```\nplain\n```", "    plain", "~~~ \nplain\n~~~"])
def test_a_code_block_without_a_language_has_an_empty_label_and_a_copy_button(text: str) -> None:
    html = render_markdown(text)
    assert '<span class="code-lang"></span>' in html
    assert '<button class="copy-code" type="button">Copy</button>' in html
    assert '<pre tabindex="0" aria-label="Code"><code>plain\n</code></pre>' in html


@pytest.mark.parametrize(
    ("info", "label"),
    [
        ('"><script>alert(1)</script>', '"&gt;&lt;script&gt;alert(1)&lt;/script&gt;'),
        ("<img/src=x/onerror=alert(1)>", "&lt;img/src=x/onerror=alert(1)&gt;"),
        ("c++ extra words", "c++"),
    ],
)
def test_the_language_label_is_the_models_first_word_escaped(info: str, label: str) -> None:
    html = render_markdown(f"```{info}\ncode\n```")
    assert f'<span class="code-lang">{label}</span>' in html
    assert {tag for tag, _ in Elements(html).found} <= {"div", "span", "button", "pre", "code"}


def test_task_lists_render_as_disabled_checkboxes() -> None:
    html = render_markdown("- [ ] to do\n- [x] done\n- plain <input type=text>")
    assert '<ul class="contains-task-list">' in html
    assert (
        '<li class="task-list-item"><input class="task-list-item-checkbox" disabled="disabled"'
        ' type="checkbox"> to do</li>'
    ) in html
    assert '<input class="task-list-item-checkbox" checked="checked" disabled="disabled"' in html
    assert "<li>plain &lt;input type=text&gt;</li>" in html
    assert html.count("<input") == 2


def test_the_sanitizer_keeps_only_inert_checkboxes_and_buttons() -> None:
    html = sanitize(
        '<input type="text" name="content" form="composer" value="x" autofocus onfocus="f()">'
        '<button type="submit" form="composer" formaction="https://e.example" class="retry">b'
        '</button><div class="message" id="messages">d</div>'
    )
    # (nh3 adds the two forced attributes of a bare input in no fixed order.)
    assert Elements(html).found == [
        ("input", {"type": "checkbox", "disabled": "disabled"}),
        ("button", {"type": "button"}),
        ("div", {}),
    ]
    assert html.endswith(">b</button><div>d</div>")


def test_footnotes_link_both_ways_with_ids_of_their_answer() -> None:
    text = "Claim[^1] and again[^1], other[^b].\n\n[^1]: The note.\n[^b]: Second <b>note</b>."
    html = render_markdown(text, doc_id=doc_id_for(5))
    assert (
        '<sup class="footnote-ref"><a href="#fn-m5-1" id="fnref-m5-1" rel="noopener nofollow">'
        "[1]</a></sup>"
    ) in html
    assert '<a href="#fn-m5-1" id="fnref-m5-1:1" rel="noopener nofollow">[1:1]</a>' in html
    assert '<li id="fn-m5-1" class="footnote-item"><p>The note.' in html
    assert '<a href="#fnref-m5-1" class="footnote-backref" rel="noopener nofollow">' in html
    assert "Second &lt;b&gt;note&lt;/b&gt;." in html
    assert '<section class="footnotes">' in html
    assert "target" not in html, "a same-page link stays in the page"
    ids = {attrs["id"] for _, attrs in Elements(html).found if "id" in attrs}
    again = Elements(render_markdown(text, doc_id="m6")).found
    other = {attrs["id"] for _, attrs in again if "id" in attrs}
    assert ids
    assert not ids & other, "two answers on one page share no id"


@pytest.mark.parametrize("doc_id", ["m-5", 'm5"><script>', "x" * 33])
def test_a_doc_id_is_letters_and_digits(doc_id: str) -> None:
    with pytest.raises(ValueError, match="doc_id must be 1 to 32 letters or digits"):
        render_markdown("x[^1]\n\n[^1]: n", doc_id=doc_id)


@pytest.mark.parametrize(
    "href", ["#composer", "#fn1x", "#fn-m5-", "#fnref1:1:1", "#FN1", "/#fn1", "javascript:#fn1"]
)
def test_same_page_links_other_than_a_footnotes_lose_their_target(href: str) -> None:
    html = sanitize(f'<a href="{href}" id="composer">x</a><li id="messages">y</li>')
    assert html == '<a rel="noopener nofollow">x</a><li>y</li>'


def test_citation_markers_link_to_their_citation() -> None:
    html = render_markdown("Otters hold hands [1], see [4].", CITED)
    assert (
        '<a href="https://one.example/a?b=1&amp;c=2" class="citation-ref" title="One"'
        ' target="_blank" rel="noopener nofollow">[1]</a>'
    ) in html
    assert 'title="&quot;&gt;&lt;script&gt;alert(4)&lt;/script&gt;"' in html
    assert "<script" not in html


@pytest.mark.parametrize(
    "text",
    [
        "`[1]` in code",
        "```\n[1] in a block\n```",
        "    [1] indented",
        "[0] [5] [01] out of range",
        "[2] is a script, [3] has no link",
        "\\[1] is escaped",
        "[1](https://other.example) [see [1]](https://other.example) are links already",
    ],
)
def test_citation_markers_elsewhere_stay_as_written(text: str) -> None:
    html = render_markdown(text, CITED)
    assert "citation-ref" not in html
    assert "one.example" not in html
    assert "javascript" not in html


def test_without_citations_a_marker_is_text() -> None:
    assert render_markdown("Cited [1].") == "<p>Cited [1].</p>\n"
    assert render_markdown("Cited [1].", []) == "<p>Cited [1].</p>\n"


@pytest.mark.parametrize(
    "parts",
    [
        ["# Title\n\n", "```python\nx = 1\n```\n", "- [ ] a\n- [x] b\n\n", "See [1].\n"],
        ["| a | b |\n|:-|-:|\n| 1 | 2 |\n\n", "    code\n\n", "> quote [4]\n"],
    ],
)
def test_a_part_of_an_answer_renders_as_it_does_in_the_whole(parts: list[str]) -> None:
    whole = render_markdown("".join(parts), CITED, doc_id="m1")
    assert "".join(render_markdown(part, CITED, doc_id="m1") for part in parts) == whole


@pytest.mark.parametrize(
    "text",
    [
        "[^1]\n\n[^1]: <script>alert(1)</script> [x](javascript:alert(1))",
        '- [x] <img src=x onerror=alert(1)>\n- [ ] <input type="text" autofocus onfocus=alert(1)>',
        "```<script>\n</code></pre><script>alert(1)</script>\n```",
        "[1]",
    ],
)
def test_nothing_executable_survives_the_new_markup(text: str) -> None:
    html = render_markdown(text, [{"url": "javascript:alert(1)", "title": "<b onclick=x>"}])
    for tag, attrs in Elements(html).found:
        assert tag in ALLOWED_TAGS
        assert not any(name.startswith("on") or name == "style" for name in attrs)
        assert tag != "input" or (attrs.get("type"), attrs.get("disabled")) == (
            "checkbox",
            "disabled",
        )
        href = attrs.get("href") or ""
        assert not href or href.startswith(("https://", "#fn"))
    assert "<script" not in html


def test_a_fence_is_highlighted_only_in_an_allowed_language_by_any_of_its_names() -> None:
    assert lexer_name("Py") == lexer_name("python3") == "python"
    assert lexer_name("c++") == "cpp"
    assert lexer_name("registry") is None  # Pygments has it; it backtracks without end
    assert lexer_name("text") is None
    assert 'class="k"' in render_markdown("```PY\ndef f(): pass\n```")


def test_task_lists_render_as_the_plugin_rendered_them() -> None:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.tasklists import tasklists_plugin

    text = "- [ ] a\n- [x] b *c*\n- [X] d\n- plain\n\n1. [ ] e\n   - [x] nested\n\n[ ] not a list\n"
    plugin = MarkdownIt("commonmark").use(tasklists_plugin).render(text)
    assert render_markdown(text) == sanitize(plugin)


class Text(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.feed(html)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    @property
    def words(self) -> list[str]:
        return " ".join(self.parts).split()


DEEP = 20
NESTED_PAST_THE_PARSERS_DEPTH = {
    "lists": "".join(f"{'  ' * n}- word{n}\n" for n in range(DEEP)),
    "quotes": "".join(f"{'>' * (n + 1)} word{n}\n" for n in range(DEEP)),
    "ordered lists": "".join(f"{'   ' * n}1. word{n}\n" for n in range(DEEP)),
    "quotes in lists": "".join(f"{'  ' * n}- > word{n}\n" for n in range(DEEP)),
}


@pytest.mark.parametrize("name", NESTED_PAST_THE_PARSERS_DEPTH)
def test_blocks_nested_past_the_parsers_depth_are_kept_as_text_under_a_note(name: str) -> None:
    text = NESTED_PAST_THE_PARSERS_DEPTH[name] + "\nThe end, and *after* it.\n"
    html = render_markdown(text)
    words = Text(html).words
    for n in range(DEEP):
        assert f"word{n}" in words, n
    assert words[-5:] == ["The", "end,", "and", "after", "it."]
    assert "<em>after</em>" in html  # what follows is formatted again
    assert html.count(TOO_DEEP_NOTE) == 1
    assert html.index(TOO_DEEP_NOTE) < html.index(f"word{DEEP - 1}")
    assert "<li>word0" in html or "<p>word0</p>" in html  # the shallow levels are formatted


def test_nesting_within_the_parsers_depth_has_no_note() -> None:
    html = render_markdown("".join(f"{'  ' * n}- word{n}\n" for n in range(8)))
    assert TOO_DEEP_NOTE not in html
    assert html.count("<ul>") == 8


def test_an_answer_whose_html_would_outgrow_its_text_is_kept_as_plain_text() -> None:
    text = "See" + " and here[^1]" * 5_000 + ".\n\n[^1]: The one note.\n"
    html = render_markdown(text, doc_id=doc_id_for(12345))
    assert len(html) <= MAX_HTML_RATIO * len(text) + HTML_ALLOWANCE
    assert PLAIN_TEXT_NOTES["too_large"] in html
    code = re.search(r'<pre class="plain-text"><code>(.*)</code></pre>', html, re.S)
    assert code is not None
    assert unescape(code[1]) == text  # all of it


def test_highlighted_code_is_not_counted_too_large() -> None:
    text = "```python\n" + "x=a+b*(c-d)/e;y=[1,2,3]\n" * 2_000 + "```\n"
    html = render_markdown(text)
    assert PLAIN_TEXT_NOTES["too_large"] not in html
    assert '<span class="k">' in html or '<span class="o">' in html


@pytest.mark.parametrize(
    ("language", "hook"),
    [
        ("mermaid", ' data-diagram="mermaid"'),
        ("Mermaid", ' data-diagram="mermaid"'),
        ("html", ' data-preview="html"'),
        ("HTML", ' data-preview="html"'),
        ("svg", ' data-preview="svg"'),
        ("python", ""),
        ("", ""),
    ],
)
def test_a_code_block_says_when_the_page_may_draw_or_preview_it(language: str, hook: str) -> None:
    """The hooks of diagrams.js and previews.js: on the block, through the one sanitizer."""
    html = render_markdown(f"```{language}\n<b>x</b>\n```")
    assert html.startswith(f'<div class="code-block"{hook}><div class="code-head">')
    assert "<b>" not in html, "the code stays text"


def test_the_hooks_are_kept_only_with_their_own_values() -> None:
    written = (
        '<div class="code-block" data-diagram="flowchart" data-preview="js">a</div>'
        '<div data-diagram="mermaid" data-other="1">b</div><p data-preview="html">c</p>'
    )
    assert sanitize(written) == (
        '<div class="code-block">a</div><div data-diagram="mermaid">b</div><p>c</p>'
    )
    raw = render_markdown('<div data-diagram="mermaid">raw html</div>')
    assert raw == '<p>&lt;div data-diagram="mermaid"&gt;raw html&lt;/div&gt;</p>\n'
