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
