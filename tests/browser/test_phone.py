"""On a touch screen, in real Chromium with touch emulated at 390x844: Enter makes a new line and
Send sends; an entry's menu opened by a finger leaves the keyboard down and shows all of itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from . import conftest
from .conftest import SIZES, choose_model

pytestmark = [pytest.mark.browser]


@pytest.fixture
def phone(alice: Any, browser: Any, server_url: str) -> Iterator[Any]:
    """alice on a touch phone (her `alice` session, in a context with touch and a phone's size)."""
    width, height = SIZES["phone"]
    context = browser.new_context(
        storage_state=conftest._sessions["alice"],
        viewport={"width": width, "height": height},
        has_touch=True,
        is_mobile=True,
    )
    page = context.new_page()
    page.goto(f"{server_url}/")
    yield page
    context.close()


def test_enter_makes_a_new_line_and_send_sends_on_a_touch_screen(phone: Any) -> None:
    # The first screen says so, not "press Enter to send it" as with keys.
    expect(phone.locator(".first-hint")).to_have_text(
        "Type your message below and tap Send to send it (Enter starts a new line).",
        use_inner_text=True,
    )
    box = phone.get_by_label("Message")
    expect(box).to_have_attribute("placeholder", "Message")
    choose_model(phone, "emulator/echo")
    box.tap()
    box.press_sequentially("two")
    box.press("Enter")
    box.press_sequentially("lines")
    expect(box).to_have_value("two\nlines")
    expect(phone.locator("article.message")).to_have_count(0)  # nothing was sent
    phone.get_by_role("button", name="Send").tap()
    expect(phone).to_have_url(re.compile(r"/c/\d+/$"))
    expect(phone.locator("article.user > .content")).to_have_text("two\nlines")


def test_an_entrys_menu_opened_by_a_finger_does_not_raise_the_keyboard(phone: Any) -> None:
    choose_model(phone, "emulator/echo")
    phone.get_by_label("Message").fill("a conversation to open the menu of")
    phone.get_by_role("button", name="Send").tap()
    expect(phone).to_have_url(re.compile(r"/c/\d+/$"))
    phone.get_by_role("button", name="Menu", exact=True).tap()
    summary = phone.locator("#sidebar .conversation-list li .item-menu summary").first
    summary.tap()
    menu = phone.locator("#sidebar .item-menu[open]")
    expect(menu).to_have_count(1)
    expect(menu.locator(".item-move > *").first).to_be_attached()  # the "Move to" part is in
    expect(menu.locator("input[name=title]")).not_to_be_focused()
    expect(menu.get_by_role("button", name="Delete")).to_be_in_viewport(ratio=1)


def test_the_conversation_gets_most_of_a_phones_screen(phone: Any) -> None:
    """With the composer idle on a conversation with an answer, the messages' scroll area takes
    at least 65% of a 390x844 screen (#45 point 14: it had 59%); the composer's controls are
    still there to be tapped, none smaller than 24 px, and the box grows as it is typed in."""
    choose_model(phone, "emulator/echo")
    phone.get_by_label("Message").fill("a question to get an answer on a phone")
    phone.get_by_role("button", name="Send").tap()
    expect(phone.locator("article.assistant")).to_have_attribute("data-status", "completed")
    phone.get_by_label("Message").blur()
    conftest.screenshots(phone, "phone-conversation")
    share = phone.evaluate(
        "() => document.getElementById('messages').getBoundingClientRect().height / innerHeight"
    )
    assert share >= 0.65, f"the conversation gets {share:.0%} of the screen"
    composer = phone.locator("#composer")
    for control in (
        phone.get_by_label("Message"),
        phone.get_by_role("button", name="Send"),
        composer.get_by_role("button", name="Attach"),
        composer.get_by_label("Model"),
        composer.get_by_role("button", name="+ Compare"),
    ):
        expect(control).to_be_in_viewport(ratio=1)
        box = control.bounding_box()
        assert box is not None
        assert min(box["height"], box["width"]) >= 24, control
    message = phone.get_by_label("Message")
    idle = message.bounding_box()["height"]
    message.fill("one\ntwo\nthree\nfour")
    phone.wait_for_function(  # the box grows with what is typed, to show it all
        "h => document.getElementById('message').getBoundingClientRect().height > h", arg=idle
    )
