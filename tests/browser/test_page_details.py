"""The page's details in real Chromium (issues 22, 37): Esc closes the header's Settings and More,
a click outside closes More, the lightbox keeps off the page header, long unbroken text wraps
instead of widening the page, no swap trips the CSP nor logs an error, and a conversation that is
not there gets our own 404 page.

With `CHAT_SCREENSHOTS` set to a directory, the lightbox, the long-token answer and the 404 page
are saved there at 1280x800 and 390x844.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import SIZES, finished, screenshots, sign_in

pytestmark = [pytest.mark.browser]

MISSING = "This conversation does not exist or was deleted."
# 300 characters with nowhere to break: a JSON string and a URL, as models do write them.
TOKEN = '{"id":"' + "0123456789abcdef" * 18 + '"}'
URL = "https://example.com/" + "a-very-long-path_segment" * 12
LONG = f"""# Heading {TOKEN[:120]}

A paragraph: {TOKEN}

- An item: {URL}
- Inline code: `{TOKEN}`

> A quote: {TOKEN}

| Key | Value |
| --- | --- |
| {TOKEN} | short |

```json
{TOKEN}
```
"""
# Each block of the answer whose text must wrap inside it.
BLOCKS = ["h1", "p", "li", "blockquote", "table", "th", "td"]
# A swap's CSP violations, from before the page's first script runs.
RECORD_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
    const { effectiveDirective, sourceFile, lineNumber } = event;
    window.cspViolations.push(`${effectiveDirective} ${sourceFile}:${lineNumber}`);
});
"""


def shoot(page: Any, name: str) -> None:
    """With `CHAT_SCREENSHOTS` set, the screen as it is, as `<name>-<width>x<height>.png`."""
    directory = os.environ.get("CHAT_SCREENSHOTS")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        size = page.viewport_size
        page.screenshot(path=f"{directory}/{name}-{size['width']}x{size['height']}.png")


def settled(page: Any) -> None:
    page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')")


# --- Esc closes the header's menus -----------------------------------------------------------


@pytest.mark.parametrize(
    ("menu", "name", "field"),
    [
        ("details.settings-menu", "Settings", "Temperature"),
        ("details.conversation-actions", "More", "Title"),
    ],
)
def test_esc_closes_a_header_menu_and_gives_the_focus_back_to_its_button(
    alice: Any, menu: str, name: str, field: str
) -> None:
    answer = finished(alice, "Close me with Esc")
    details = alice.locator(f"header.chat-header {menu}")
    button = details.locator("summary")
    expect(button).to_have_text(name)
    # From a field inside its panel...
    button.click()
    details.get_by_label(field).click()
    alice.keyboard.press("Escape")
    expect(details).to_have_js_property("open", False)
    expect(button).to_be_focused()
    # ...and from its button, opened from the keyboard.
    alice.keyboard.press("Enter")
    expect(details).to_have_js_property("open", True)
    alice.keyboard.press("Escape")
    expect(details).to_have_js_property("open", False)
    expect(button).to_be_focused()
    expect(answer).to_have_attribute("data-status", "completed")


def test_a_click_outside_closes_more_and_a_click_inside_keeps_it_open(alice: Any) -> None:
    finished(alice, "Close me with a click elsewhere")
    more = alice.locator("header.chat-header details.conversation-actions")
    more.locator("summary").click()
    more.get_by_label("Title").click()
    expect(more).to_have_js_property("open", True)
    alice.locator("#messages").click(position={"x": 5, "y": 5})
    expect(more).to_have_js_property("open", False)
    # An entry's menu in the sidebar and More: opening one closes the other.
    more.locator("summary").click()
    expect(more).to_have_js_property("open", True)
    item_menu = alice.locator("#conversation-groups details.item-menu").first
    item_menu.locator("summary").click()
    expect(item_menu).to_have_js_property("open", True)
    expect(more).to_have_js_property("open", False)
    more.locator("summary").click()
    expect(item_menu).to_have_js_property("open", False)


# --- The lightbox ----------------------------------------------------------------------------


def test_the_lightbox_close_button_keeps_off_the_page_header(alice: Any) -> None:
    answer = finished(alice, "A picture of otters", "emulator/image")
    image = answer.locator(".attachments img.image")
    dialog = alice.get_by_role("dialog", name="Image")
    close = dialog.get_by_role("button", name="Close")
    for width, height in SIZES.values():
        alice.set_viewport_size({"width": width, "height": height})
        image.click()
        expect(close).to_be_visible()
        settled(alice)
        header = alice.locator("header.chat-header").bounding_box()
        box = close.bounding_box()
        assert box["y"] >= header["y"] + header["height"], f"Close {box} is on the header {header}"
        picture = dialog.locator("img").bounding_box()
        assert picture["y"] >= box["y"] + box["height"], "Close is above the picture"
        assert picture["y"] + picture["height"] <= height + 0.5, "the whole picture is on screen"
        assert picture["width"] > image.bounding_box()["width"], "shown larger"
        shoot(alice, "lightbox")
        close.click()
        expect(dialog).to_be_hidden()


# --- Long unbroken text ----------------------------------------------------------------------


def test_long_unbroken_text_wraps_in_every_block_and_never_widens_the_page(alice: Any) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    answer = finished(alice, LONG)
    rendered = answer.locator(".content.rendered")
    for block in BLOCKS:
        expect(rendered.locator(block).first).to_be_attached()
    overflowing = rendered.evaluate(
        """(content, blocks) => [
                content, content.closest("article"), document.getElementById("messages"),
                ...content.querySelectorAll(blocks.join(",")),
            ]
            .filter((el) => el.scrollWidth > el.clientWidth)
            .map((el) => `${el.tagName} ${el.scrollWidth} > ${el.clientWidth}`)""",
        BLOCKS,
    )
    assert overflowing == []
    assert alice.evaluate("document.documentElement.scrollWidth") <= 390
    # The code block scrolls inside itself, within the answer.
    pre = rendered.locator("pre")
    assert pre.evaluate("el => el.scrollWidth > el.clientWidth"), "the code scrolls"
    content = rendered.bounding_box()
    code = pre.bounding_box()
    assert code["x"] + code["width"] <= content["x"] + content["width"] + 0.5
    screenshots(
        alice, "long-tokens", lambda page: rendered.locator("table").scroll_into_view_if_needed()
    )


# --- No inline styles for the CSP to refuse --------------------------------------------------


def test_no_swap_trips_the_csp(alice: Any, server_url: str) -> None:
    alice.add_init_script(RECORD_CSP)
    alice.goto(f"{server_url}/")
    finished(alice, "An older conversation")
    alice.get_by_role("link", name="New chat", exact=True).click()
    # A send, a settings save, the lightbox, and the history htmx puts back after a boosted link.
    answer = finished(alice, "A picture of otters", "emulator/image")
    header = alice.locator("header.chat-header")
    header.get_by_text("Settings", exact=True).click()
    header.get_by_label("Temperature").fill("0.4")
    header.get_by_role("button", name="Save settings").click()
    expect(header.locator(".settings-applied")).to_contain_text("temperature 0.4")
    answer.locator(".attachments img.image").click()
    alice.keyboard.press("Escape")
    expect(alice.get_by_role("dialog", name="Image")).to_be_hidden()
    url = alice.url
    alice.locator("#conversation-groups a", has_text="An older conversation").click()
    expect(alice.locator("#conversation-title")).to_have_text("An older conversation")
    alice.go_back()
    expect(alice).to_have_url(url)
    expect(alice.locator("#conversation-title")).to_have_text("A picture of otters")
    # The lightbox still opens on the page put back, and closes.
    alice.locator(".attachments img.image").click()
    expect(alice.get_by_role("dialog", name="Image")).to_be_visible()
    alice.get_by_role("dialog", name="Image").get_by_role("button", name="Close").click()
    expect(alice.get_by_role("dialog", name="Image")).to_be_hidden()
    assert alice.evaluate("window.cspViolations") == []


def test_the_htmx_indicator_is_styled_from_our_stylesheet(alice: Any) -> None:
    """htmx's own indicator styles are off (they would be an inline `<style>`), so ours show an
    `.htmx-indicator` only while its request runs."""
    visibility = alice.evaluate(
        """() => {
            const request = document.createElement("div");
            const indicator = document.createElement("span");
            indicator.className = "htmx-indicator";
            request.append(indicator);
            document.body.append(request);
            const idle = getComputedStyle(indicator).visibility;
            request.classList.add("htmx-request");
            const busy = getComputedStyle(indicator).visibility;
            request.remove();
            return [idle, busy];
        }"""
    )
    assert visibility == ["hidden", "visible"]


# --- A conversation that is not there --------------------------------------------------------


def missing_page(page: Any, url: str) -> None:
    """`url` answers 404 with our own page: the sidebar, why, and a way to a new chat."""
    response = page.goto(url)
    assert response is not None
    assert response.status == 404
    expect(page.get_by_text(MISSING)).to_be_visible()
    expect(page).to_have_title(re.compile("Gateway Chat"))


def test_a_missing_conversation_gets_our_404_page_with_a_way_to_a_new_chat(
    alice: Any, bob: Any, server_url: str
) -> None:
    missing_page(alice, f"{server_url}/c/999999/")
    expect(alice.get_by_role("navigation", name="Conversations")).to_be_visible()
    shown = alice.locator("main").inner_text()
    screenshots(alice, "missing-conversation")
    alice.get_by_role("link", name="Start a new chat").click()
    expect(alice).to_have_url(f"{server_url}/")
    expect(alice.get_by_label("Message")).to_be_focused()

    # A deleted one.
    finished(alice, "Soon gone")
    deleted = alice.url
    alice.get_by_text("More", exact=True).click()
    alice.once("dialog", lambda dialog: dialog.accept())
    alice.get_by_role("button", name="Delete conversation").click()
    expect(alice).to_have_url(f"{server_url}/")
    missing_page(alice, deleted)

    # Another user's says no more than one that never was.
    finished(bob, "Bob's secret plans")
    missing_page(alice, bob.url)
    assert alice.locator("main").inner_text() == shown
    expect(alice.locator("body")).not_to_contain_text("Bob's secret plans")

    # Any other address that leads nowhere gets a page of ours too.
    response = alice.goto(f"{server_url}/nowhere/")
    assert response is not None
    assert response.status == 404
    expect(alice.get_by_role("heading", name="Page not found")).to_be_visible()
    alice.get_by_role("link", name="Back to the chat").click()
    expect(alice).to_have_url(f"{server_url}/")


def test_a_sidebar_link_to_a_conversation_deleted_elsewhere_shows_our_404_page(
    alice: Any, browser: Any, server_url: str
) -> None:
    title = f"Gone elsewhere {time.monotonic_ns()}"
    finished(alice, title)
    gone = alice.url
    alice.goto(f"{server_url}/")
    other = sign_in(browser, server_url, "alice")  # the same user in another window
    try:
        other.goto(gone)
        other.get_by_text("More", exact=True).click()
        other.once("dialog", lambda dialog: dialog.accept())
        other.get_by_role("button", name="Delete conversation").click()
        expect(other).to_have_url(f"{server_url}/")
    finally:
        other.context.close()
    # This window's list still has it: following the link says it is gone, and leads back.
    alice.locator("#conversation-groups").get_by_role("link", name=title, exact=True).click()
    expect(alice.get_by_text(MISSING)).to_be_visible()
    alice.get_by_role("link", name="Start a new chat").click()
    expect(alice).to_have_url(f"{server_url}/")


# --- The console stays clean -----------------------------------------------------------------


def test_a_new_chat_and_its_follow_up_log_no_error_and_trip_no_csp(
    alice: Any, server_url: str
) -> None:
    """Picking a model on a new chat posts its settings, which once inherited the composer's
    `hx-disabled-elt` and logged htmx's "returned no matches!" with no submit button to find."""
    errors: list[str] = []
    alice.on("console", lambda message: message.type == "error" and errors.append(message.text))
    alice.on("pageerror", lambda error: errors.append(str(error)))
    alice.add_init_script(RECORD_CSP)
    alice.goto(f"{server_url}/")
    finished(alice, "A first question")
    finished(alice, "A follow-up", "emulator/chat")
    expect(alice.locator("article.assistant")).to_have_count(2)
    assert errors == []
    assert alice.evaluate("window.cspViolations") == []


def test_a_resized_message_box_trips_no_csp_when_the_new_conversation_swaps_in(
    alice: Any, server_url: str
) -> None:
    """Dragging the message box's corner makes Chromium write its size into a `style` attribute.
    htmx's settle step copied that attribute onto the swapped-in box of the same id with
    `setAttribute`, which the CSP (`style-src 'self'`) refuses: seen as htmx's "inline style"
    violations on a first send."""
    alice.add_init_script(RECORD_CSP)
    alice.goto(f"{server_url}/")
    alice.evaluate("document.getElementById('message').style.height = '140px'")  # as a drag does
    assert alice.get_attribute("#message", "style")
    finished(alice, "A first question")
    assert alice.evaluate("window.cspViolations") == []
