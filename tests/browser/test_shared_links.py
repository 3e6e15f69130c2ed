"""Shared links in Chromium: the owner makes one from the header and copies it, a signed-out
reader sees the branch rendered as in the app with no socket and no cookie (and nothing written
later), someone else signed in sees it too, and once the owner revokes it, it is a 404."""

from __future__ import annotations

import re
import secrets
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import finished, screenshots, send

pytestmark = [pytest.mark.browser]

QUESTION = "Pack for **Lisbon**:\n\n- shoes\n- a hat\n\n```python\nprint('tram 28')\n```\n"


def test_a_link_opens_signed_out_shows_the_branch_and_stops_when_revoked(
    alice: Any, bob: Any, browser: Any, server_url: str
) -> None:
    alice.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server_url)
    marker = secrets.token_hex(3)
    answer = finished(alice, f"{marker} {QUESTION}")
    owners_text = answer.locator(".content").inner_text()

    alice.locator("details.conversation-actions > summary").click()
    alice.get_by_role("button", name="Create a share link").click()
    address = alice.get_by_label("The new link")
    expect(alice.locator(".share-created")).to_contain_text("the 2 messages on screen")
    expect(address).to_have_value(re.compile(rf"^{re.escape(server_url)}/s/[A-Za-z0-9_-]{{43}}/$"))
    url = address.input_value()
    copy = alice.locator("button.copy-link")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert alice.evaluate("navigator.clipboard.readText()") == url
    screenshots(alice, "share-menu")
    alice.keyboard.press("Escape")
    expect(alice.locator("details.conversation-actions")).to_have_js_property("open", False)

    later = f"written after sharing {marker}"
    finished(alice, later)

    reader_context = browser.new_context()
    reader = reader_context.new_page()
    sockets: list[str] = []
    reader.on("websocket", lambda socket: sockets.append(socket.url))
    response = reader.goto(url)
    assert response is not None
    assert response.status == 200
    assert response.headers["x-robots-tag"] == "noindex"
    expect(reader.locator("article.message")).to_have_count(2)
    shared_answer = reader.locator("article.message.assistant")
    expect(shared_answer.locator(".content.rendered strong")).to_have_text("Lisbon")
    expect(shared_answer.locator(".content .code-block .copy-code")).to_be_visible()
    assert shared_answer.locator(".content").inner_text() == owners_text
    expect(reader.get_by_text(later)).to_have_count(0)
    expect(reader.locator("#composer, form, .stop, .retry, .versions")).to_have_count(0)
    expect(shared_answer.locator(".meta")).to_have_text("emulator/echo")
    reader.wait_for_load_state("networkidle")
    assert sockets == []
    assert reader_context.cookies() == []
    screenshots(reader, "shared-page")

    # Signed in as someone else, the link reads the same (and Bob's own page does open a socket,
    # so the empty list above means something).
    with bob.expect_websocket() as opened:
        bob.reload()
    assert opened.value.url.endswith("/ws/chat/")
    bob.goto(url)
    expect(bob.locator("article.message")).to_have_count(2)
    expect(bob.locator("article.message.assistant .content.rendered strong")).to_have_text("Lisbon")

    alice.goto(f"{server_url}/shared/")
    row = alice.locator("li.shared-link").filter(has_text=marker)
    expect(row).to_have_count(1)
    expect(row).to_contain_text("2 messages")
    screenshots(alice, "shared-links")
    alice.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Revoke").click()
    expect(row).to_have_class(re.compile(r"\brevoked\b"))
    expect(row).to_contain_text("revoked")

    gone = reader.reload()
    assert gone is not None
    assert gone.status == 404
    expect(reader.get_by_role("heading", name="This shared link does not work")).to_be_visible()
    expect(reader.get_by_text(marker)).to_have_count(0)
    screenshots(reader, "shared-gone")
    reader_context.close()


def test_a_shared_branch_shows_its_reasoning_folded_and_its_images_signed_out(
    alice: Any, browser: Any, server_url: str
) -> None:
    finished(alice, "Why is the sky blue?", "emulator/reasoning")
    picture = send(alice, "A lighthouse at dusk", "emulator/image")
    expect(picture).to_have_attribute("data-status", "completed", timeout=30_000)
    alice.locator("details.conversation-actions > summary").click()
    alice.get_by_role("button", name="Create a share link").click()
    url = alice.get_by_label("The new link").input_value()

    reader_context = browser.new_context()
    reader = reader_context.new_page()
    reader.goto(url)
    reasoning = reader.locator("details.reasoning-pane")
    expect(reasoning).to_have_count(1)
    expect(reasoning).not_to_have_attribute("open", "")
    expect(reasoning.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    reasoning.locator("summary").click()
    expect(reasoning.locator(".reasoning")).to_be_visible()
    image = reader.locator("article.assistant figure.generated-image img")
    expect(image).to_have_count(1)
    assert re.fullmatch(r"/s/[A-Za-z0-9_-]{43}/images/4/0/", image.get_attribute("src") or "")
    image.scroll_into_view_if_needed()
    reader.wait_for_function(
        "img => img.complete && img.naturalWidth === 32", arg=image.element_handle()
    )
    screenshots(reader, "shared-reasoning-and-image")
    image.click()  # answer_tools.js runs on the shared page: the lightbox opens
    expect(reader.get_by_role("dialog", name="Image")).to_be_visible()
    reader_context.close()
