"""The keyboard shortcuts in real Chromium (static/chatapp/shortcuts.js): a new chat, the
sidebar's search, ↑ in the empty message box to edit the last question and Esc to leave it, and
the list of them (? or the sidebar's "Keyboard shortcuts"); / and ? never taken from a field.

Set `CHAT_SCREENSHOTS` to a directory to keep the list's screenshots, light and dark.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import finished, screenshots

pytestmark = [pytest.mark.browser]


def blur(page: Any) -> None:
    """The focus on nothing (the page's body), as after a click on the page's background."""
    page.evaluate("document.activeElement?.blur()")
    page.wait_for_function("document.activeElement === document.body")


def test_mod_shift_o_starts_a_new_chat_even_from_the_message_box(
    alice: Any, server_url: str
) -> None:
    finished(alice, "Before a new chat", "emulator/echo")
    box = alice.get_by_label("Message")
    box.fill("a draft")
    box.press("Control+Shift+O")
    expect(alice).to_have_url(f"{server_url}/")
    expect(alice.locator("#messages article.message")).to_have_count(0)


def test_mod_k_and_slash_focus_the_search(alice: Any) -> None:
    search = alice.get_by_role("searchbox", name="Search conversations")
    box = alice.get_by_label("Message")
    expect(box).to_be_focused()
    box.press("Control+k")  # a documented modifier: taken while typing too
    expect(search).to_be_focused()
    blur(alice)
    alice.keyboard.press("/")
    expect(search).to_be_focused()
    expect(search).to_have_value("")  # the key opened the search; it did not type itself in it
    # While typing, / and ? are characters.
    box.click()
    box.press_sequentially("a/b?")
    expect(box).to_have_value("a/b?")
    expect(box).to_be_focused()
    expect(alice.get_by_role("dialog", name="Keyboard shortcuts")).to_have_count(0)
    search.fill("x")
    search.press("/")
    expect(search).to_have_value("x/")


def test_mod_k_opens_the_drawer_on_a_phone(alice: Any) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    search = alice.get_by_role("searchbox", name="Search conversations")
    expect(search).not_to_be_visible()
    alice.get_by_label("Message").press("Control+k")
    expect(search).to_be_focused()
    expect(search).to_be_in_viewport()
    expect(alice.locator(".layout")).to_have_attribute("data-drawer", "open")


def test_arrow_up_in_the_empty_box_edits_the_last_question_and_esc_leaves_it(alice: Any) -> None:
    finished(alice, "First question", "emulator/echo")
    finished(alice, "Second question", "emulator/echo")
    box = alice.get_by_label("Message")
    questions = alice.locator("#messages > article.message.user")
    edit = questions.last.locator(".edit-form textarea")
    # Not while the box holds a draft: ↑ moves in the draft.
    box.fill("a draft")
    box.press("ArrowUp")
    expect(alice.locator(".edit-form")).to_have_count(0)
    box.fill("")
    box.press("ArrowUp")
    expect(edit).to_be_focused()
    expect(edit).to_have_value("Second question")
    expect(questions.first.locator(".edit-form")).to_have_count(0)
    edit.press("Escape")
    expect(alice.locator(".edit-form")).to_have_count(0)
    expect(questions.last.locator(".content")).to_have_text("Second question")
    expect(box).to_be_focused()  # back where ↑ was pressed
    # ↑ again, and the edit is sent: the question's new version, answered.
    box.press("ArrowUp")
    edit.fill("Second question, edited")
    edit.press("Enter")
    expect(questions.last.locator(".content")).to_have_text("Second question, edited")
    expect(alice.locator("article.assistant").last).to_have_attribute("data-status", "completed")


def test_question_mark_and_the_sidebar_open_the_list_of_shortcuts(alice: Any) -> None:
    dialog = alice.get_by_role("dialog", name="Keyboard shortcuts")
    blur(alice)
    alice.keyboard.press("?")
    expect(dialog).to_be_visible()
    row = dialog.get_by_role("row", name=re.compile("^New chat"))
    expect(row).to_contain_text("Ctrl+Shift+O")  # Chromium on Linux: Ctrl, not ⌘
    expect(dialog.get_by_role("row", name=re.compile("^Search conversations"))).to_contain_text(
        "Ctrl+K or /"
    )
    expect(dialog.get_by_role("row", name=re.compile("^Edit your last question"))).to_contain_text(
        "↑"
    )
    screenshots(alice, "shortcuts-light")
    alice.emulate_media(color_scheme="dark")
    screenshots(alice, "shortcuts-dark")
    alice.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    opener = alice.get_by_role("button", name="Keyboard shortcuts")
    opener.click()
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()
    alice.get_by_label("Message").press("Control+/")
    expect(dialog).to_be_visible()
