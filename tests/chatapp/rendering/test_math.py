"""Formulas render as MathML through the one sanitizer; prose dollars stay text; nothing that
MathML could carry (links, styles, HTML islands) survives."""

from __future__ import annotations

import pytest

from chatapp.rendering.markdown import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, render_markdown, sanitize
from chatapp.rendering.math import MATH_TAGS, MAX_FORMULA, mathml
from tests.chatapp.rendering.test_rendering import Elements


@pytest.mark.parametrize(
    ("text", "display"),
    [
        ("Euler: $e^{i\\pi} + 1 = 0$.", "inline"),
        ("Euler: \\(e^{i\\pi} + 1 = 0\\).", "inline"),
        ("So:\n$$\n\\frac{a}{b}\n$$\n", "block"),
        ("So: \\[\\frac{a}{b}\\]", "block"),
        ("So: $$\\frac{a}{b}$$ in a line", "block"),
    ],
)
def test_each_delimiter_renders_mathml(text: str, display: str) -> None:
    html = render_markdown(text)
    found = Elements(html).found
    assert ("math", {"display": display}) in found
    for delimiter in ("$", "\\(", "\\["):
        assert delimiter not in html


def test_a_block_formula_interrupts_a_paragraph_and_renders_once() -> None:
    html = render_markdown("So:\n$$\nx^2\n$$\nafter")
    assert html.count("<math") == 1
    assert html.startswith('<p>So:</p>\n<div class="math-block"><math display="block">')
    assert html.endswith("<p>after</p>\n")


@pytest.mark.parametrize(
    "text",
    [
        "It costs $5 and $10.",
        "From $5 to $10 a month",
        "$5/$10 or $5-$6, $ 5 and 5$",
        "A \\$ sign and $x $ and $ y$.",
        "Nothing between: $$ $$ and $$\n$$",
        "`$x$` in code",
        "```\n$$\nx\n$$\n```",
    ],
)
def test_dollars_in_prose_and_code_stay_text(text: str) -> None:
    html = render_markdown(text)
    assert "<math" not in html
    assert "$" in html


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("bad $\\frac{$ here", "$\\frac{$"),
        ("an \\(\\unknowncommand{x}\\)", "\\(\\unknowncommand{x}\\)"),
        ("$" + "x" * (MAX_FORMULA + 1) + "$", "$" + "x" * (MAX_FORMULA + 1) + "$"),
    ],
)
def test_a_formula_that_does_not_convert_shows_as_its_source_in_code(
    text: str, source: str
) -> None:
    html = render_markdown(text)
    assert "<math" not in html
    assert f'<code class="math-source">{source}</code>' in html


def test_symbols_are_characters_and_text_is_escaped() -> None:
    assert mathml("\\alpha < \\text{a & b}", False) == (
        '<math display="inline"><mrow><mi>\u03b1</mi><mo>&lt;</mo>'
        "<mtext>a\xa0&amp;\xa0b</mtext></mrow></math>"
    )


def test_many_unclosed_brackets_render_as_text() -> None:
    text = "\\( a " * 5_000
    assert "<math" not in render_markdown(text)


MATH_PAYLOADS = [
    # what models could write in LaTeX that latex2mathml turns into attributes or markup
    "$\\href{javascript:alert(1)}{click}$",
    "$\\href{https://evil.example}{click}$",
    "$\\style{background:url(javascript:alert(1))}{x}$",
    "$\\class{copy-code}{x}$",
    "$\\color{red}{x}$ $\\mathcolor{red}{y}$",
    "$\\html{<img src=x onerror=alert(1)>}$",
    "$\\text{<img src=x onerror=alert(1)>}$",
    "\\(\\text{</mtext></math><script>alert(1)</script>}\\)",
    "$$\n\\text{<svg onload=alert(1)>}\n$$",
    "$\\mathrm{<iframe srcdoc=x>}$",
    "$\\text{\\&lt;script\\&gt;}$ $\\text{&#x3C;script&#x3E;alert(1)}$",
    "$\\text{$x$}$",
]
# Raw MathML, as if it reached the sanitizer: the markup markdown-it never makes (HTML is off),
# so this proves the sanitizer itself keeps nothing executable inside `<math>`.
RAW_MATHML = [
    '<math><maction actiontype="statusline" xlink:href="javascript:alert(1)">'
    "<mi>x</mi></maction></math>",
    '<math><mtext href="javascript:alert(1)">x</mtext><mi xlink:href="javascript:alert(1)">y</mi>'
    "</math>",
    '<math><mi style="color:red" class="copy-code" id="fn1" onclick="alert(1)">x</mi></math>',
    '<math><semantics><annotation-xml encoding="text/html"><img src=x onerror=alert(1)>'
    "</annotation-xml></semantics></math>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph></table>"
    "</mtext></math>",
    "<math><mi><svg><foreignObject><img src=x onerror=alert(1)></foreignObject></svg></mi></math>",
    '<math><mspace width="url(javascript:alert(1))"></mspace><mstyle mathcolor="red"'
    ' mathbackground="url(x)"></mstyle></math>',
    '<math><a href="javascript:alert(1)"><mi>x</mi></a><mrow href="javascript:alert(1)">'
    "<mi>y</mi></mrow></math>",
    "<math><mi>x</mi></math><mi>stray</mi><mrow><img src=x onerror=alert(1)></mrow>",
    '<math><mo><form action="https://evil.example"><input name=x></form></mo></math>',
]


def _inert(html: str) -> None:
    for tag, attrs in Elements(html).found:
        assert tag in ALLOWED_TAGS, tag
        allowed = ALLOWED_ATTRIBUTES.get(tag, set()) | {"rel", "target", "type", "disabled"}
        assert set(attrs) <= allowed, (tag, attrs)
        for value in attrs.values():
            assert "javascript" not in (value or "").lower()
            assert "(" not in (value or "") or tag not in MATH_TAGS
        if tag in MATH_TAGS:
            assert not {"href", "style", "class", "id"} & set(attrs)
    for word in ("<script", "<img", "<svg", "<iframe", "<style", "<form", "<a "):
        assert word not in html, word


@pytest.mark.parametrize("text", MATH_PAYLOADS)
def test_nothing_executable_survives_in_a_formula(text: str) -> None:
    _inert(render_markdown(text))


@pytest.mark.parametrize("html", RAW_MATHML)
def test_the_sanitizer_keeps_only_mathml_and_its_plain_attributes(html: str) -> None:
    cleaned = sanitize(html)
    _inert(cleaned)
    for tag in ("maction", "annotation", "semantics", "mglyph", "foreignObject"):
        assert f"<{tag}" not in cleaned.lower()


CORPUS_PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "<iframe src=https://evil.example></iframe>",
    "<style>body{display:none}</style>",
    '<svg onload="alert(1)"></svg>',
    "</script><img src=x onerror=\"window.__xss='img'\">",
]


@pytest.mark.parametrize("payload", CORPUS_PAYLOADS)
@pytest.mark.parametrize(
    "form", ["${}$", "$\\text{{{}}}$", "\\({}\\)", "\\[{}\\]", "$$\n{}\n$$", "$$\\mathrm{{{}}}$$"]
)
def test_no_payload_of_the_corpus_runs_through_mathml(payload: str, form: str) -> None:
    _inert(render_markdown(form.format(payload)))
