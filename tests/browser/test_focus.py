"""Where the keyboard's focus goes when what holds it is re-rendered or covered, in real Chromium:
a thumb keeps it across its block's swap and the answer's later renders, Regenerate hands it to
the new answer, and the phone's open drawer is the only thing Tab reaches."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import SIZES, finished

pytestmark = [pytest.mark.browser]


def test_a_thumb_pressed_with_the_keyboard_keeps_the_focus(alice: Any) -> None:
    answer = finished(alice, "Keep my focus.")
    good = answer.get_by_role("button", name="Good answer")
    alice.evaluate("window.samePage = true")
    good.focus()
    alice.keyboard.press("Enter")
    expect(good).to_have_attribute("aria-pressed", "true")
    expect(good).to_be_focused()
    # Pressed again the moment it has the focus: the swapped-in block must already be wired by
    # htmx by then, or the Enter submits its form natively and reloads the page (seen in about
    # half the runs before focus_keeper waited for the swap to settle).
    alice.keyboard.press("Enter")
    expect(good).to_have_attribute("aria-pressed", "false")
    expect(good).to_be_focused()
    assert alice.evaluate("window.samePage === true"), "the page was reloaded"


def test_regenerate_pressed_with_the_keyboard_hands_the_focus_to_the_new_answer(
    alice: Any,
) -> None:
    answer = finished(alice, "Once more, please.")
    old = answer.get_attribute("data-message")
    answer.get_by_role("button", name="Regenerate").focus()
    alice.keyboard.press("Enter")
    new = alice.locator("article.assistant").last
    expect(new).not_to_have_attribute("data-message", old or "")
    expect(new).to_be_focused()
    finished_again = alice.locator(f"#{new.get_attribute('id')}")
    expect(finished_again).to_have_attribute("data-status", "completed")
    expect(finished_again).to_be_focused()  # its final render kept it
    alice.keyboard.press("Tab")  # on from the answer, not from the top of the page
    assert alice.evaluate("document.activeElement.closest('article.assistant') !== null")


def test_tab_stays_in_the_phones_open_drawer(alice: Any) -> None:
    width, height = SIZES["phone"]
    alice.set_viewport_size({"width": width, "height": height})
    menu = alice.get_by_role("button", name="Menu", exact=True)
    menu.click()
    close = alice.get_by_role("button", name="Close the menu")
    expect(close).to_be_focused()
    alice.keyboard.press("Shift+Tab")  # the ☰ is before the drawer, and under it
    expect(menu).not_to_be_focused()
    close.click()
    expect(menu).to_be_focused()


def test_skip_links_lead_to_the_messages_and_to_the_message_box(alice: Any) -> None:
    finished(alice, "First question.")
    finished(alice, "Second question.")
    box = alice.get_by_label("Message")
    first = alice.locator("article.message").first
    inside_first = "(el) => el.contains(document.activeElement)"
    back = alice.get_by_role("link", name="Skip to the first message")
    hidden = back.bounding_box()
    assert hidden is not None
    assert hidden["width"] <= 1  # out of sight until the keyboard reaches it
    box.focus()
    alice.keyboard.press("Shift+Tab")
    expect(back).to_be_focused()
    expect(back).to_be_in_viewport()
    alice.keyboard.press("Enter")
    alice.keyboard.press("Tab")  # the first message's controls are next
    assert alice.evaluate(inside_first, first.element_handle())

    top = alice.get_by_role("link", name="Skip to the messages")
    first_stop = alice.evaluate(
        """() => document.querySelector(
            'a[href], button, input:not([type=hidden]), select, textarea, summary').textContent"""
    )
    assert first_stop == "Skip to the messages"  # the page's first Tab stop
    top.focus()
    expect(top).to_be_in_viewport()
    alice.keyboard.press("Tab")
    to_box = alice.get_by_role("link", name="Skip to the message box")
    expect(to_box).to_be_focused()
    alice.keyboard.press("Enter")
    expect(box).to_be_focused()


def test_a_header_panel_closes_when_the_focus_leaves_it(alice: Any) -> None:
    finished(alice, "A question.")
    more = alice.locator("details.conversation-actions")
    more.locator("summary").click()
    expect(more).to_have_attribute("open", "")
    alice.get_by_label("Title").focus()
    alice.get_by_label("Message").focus()
    expect(more).not_to_have_attribute("open", "")
