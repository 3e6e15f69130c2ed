"""A new chat's first message in real Chromium: Settings beside the composer that apply to the
conversation it makes, with the draft and the model kept while they change; a model picker that
filters as you type and starts on the model last used; and a note, before sending, when the model
picked answers by calling a tool and no tool is on.

With `CHAT_SCREENSHOTS` set to a directory, the composer's Settings, the filtered picker and the
tools note are saved there at desktop and phone sizes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import choose_model, finished, screenshots
from .test_answer_settings import SYSTEM, fill_settings, no_defaults, sent_with

pytestmark = [pytest.mark.browser]

__all__ = ["no_defaults"]  # the fixture, used here by name

APPLIED = "System prompt · temperature 0.7 · max 2,048 tokens · effort high · tools: calculator"
DRAFT = "What is 6 times 7, in French?"


def composer_settings(page: Any) -> Any:
    """Open the composer's Settings; its panel."""
    page.locator("#composer").get_by_text("Settings", exact=True).click()
    panel = page.locator("#composer .new-chat-settings .settings-form")
    expect(panel).to_be_visible()
    return panel


def test_settings_beside_the_composer_apply_to_the_first_answer_and_keep_the_draft(
    alice: Any, received: list[dict[str, Any]], no_defaults: None
) -> None:
    choose_model(alice, "emulator/echo")
    picked = alice.get_by_label("Model").input_value()
    box = alice.get_by_label("Message")
    box.fill(DRAFT)
    line = alice.locator("#new-chat-applied")
    expect(line).to_have_text("Gateway defaults")
    panel = composer_settings(alice)
    fill_settings(panel)
    panel.get_by_role("checkbox", name="Calculator").check()
    expect(line).to_have_text(APPLIED)
    screenshots(alice, "new-chat-settings")
    panel.get_by_role("button", name="Done").click()
    expect(panel).to_be_hidden()
    # Nothing was sent or saved and the page did not change: the draft and the model are kept.
    expect(alice).to_have_url(re.compile(r"/$"))
    expect(box).to_have_value(DRAFT)
    expect(alice.get_by_label("Model")).to_have_value(picked)
    assert received == []
    box.press("Enter")
    answer = alice.locator("article.assistant").last
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(answer).to_have_attribute("data-status", "completed")
    expect(alice.locator("header.chat-header .settings-applied")).to_have_text(APPLIED)
    body = sent_with(received, DRAFT)
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert (body["temperature"], body["max_tokens"]) == (0.7, 2048)
    assert body["reasoning"] == {"effort": "high"}
    assert [tool["function"]["name"] for tool in body["tools"]] == ["calculator"]
    # The defaults were not changed: the next new chat starts from them again.
    alice.get_by_role("link", name="New chat", exact=True).click()
    expect(alice.locator("#new-chat-applied")).to_have_text("Gateway defaults")


def test_a_wrong_setting_is_shown_and_the_draft_stays(alice: Any) -> None:
    box = alice.get_by_label("Message")
    box.fill(DRAFT)
    panel = composer_settings(alice)
    panel.get_by_label("Max tokens").fill("0")
    panel.get_by_label("Max tokens").press("Tab")
    expect(alice.locator("#new-chat-applied")).to_have_text(
        "Max tokens is a whole number from 1 to 1,000,000."
    )
    panel.get_by_role("button", name="Done").click()
    box.press("Enter")  # the browser refuses it, and shows the field
    expect(panel).to_be_visible()
    assert panel.get_by_label("Max tokens").evaluate("el => el.validity.rangeUnderflow")
    expect(box).to_have_value(DRAFT)
    expect(alice).to_have_url(re.compile(r"/$"))


def test_typing_in_the_filter_narrows_the_picker(alice: Any) -> None:
    picker = alice.get_by_label("Model")
    options = alice.locator("#model option")
    total = options.count()
    assert total > 3
    search = alice.get_by_label("Filter by name")
    search.fill("too")  # "Emulator: tools"
    expect(options).to_have_count(
        alice.locator("#model option").filter(has_text=re.compile("too", re.I)).count()
    )
    for text in options.all_inner_texts():
        assert "too" in text.lower()
    expect(picker).to_have_value(re.compile(r":emulator/tools$"))
    expect(alice.locator("[data-selected-model]")).to_have_text(re.compile(r"^Emulator: tools"))
    expect(alice.locator("#model-filter-count")).to_have_text(
        re.compile(rf"^{options.count()} of {total}$")
    )
    # Two words, in any order, each somewhere in the name.
    search.fill("start slow")
    expect(picker).to_have_value(re.compile(r":emulator/slow-start$"))
    search.fill("nothing like it")
    expect(alice.locator("#model-filter-count")).to_have_text("None match")
    expect(options).to_have_count(total)  # the list is left whole, the choice kept
    expect(picker).to_have_value(re.compile(r":emulator/slow-start$"))
    # The keys: arrows step through the matches, Enter goes on to the message, Esc clears.
    search.fill("error")
    expect(picker).to_have_value(re.compile(r":emulator/error-before$"))
    search.press("ArrowDown")
    expect(picker).to_have_value(re.compile(r":emulator/error-midstream$"))
    search.press("ArrowUp")
    expect(picker).to_have_value(re.compile(r":emulator/error-before$"))
    search.press("Escape")
    expect(search).to_have_value("")
    expect(options).to_have_count(total)
    expect(picker).to_have_value(re.compile(r":emulator/error-before$"))
    search.fill("echo")
    search.press("Enter")
    expect(alice.get_by_label("Message")).to_be_focused()
    expect(alice).to_have_url(re.compile(r"/$"))
    expect(picker).to_have_value(re.compile(r":emulator/echo$"))

    def narrowed(page: Any) -> None:  # the native drop-down is not in a screenshot; a list box is
        page.get_by_label("Filter by name").fill("emulator s")
        page.eval_on_selector("#model", "el => { el.size = 6; }")

    screenshots(alice, "model-filter", narrowed)


def test_the_filter_works_on_a_phone(alice: Any) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    search = alice.get_by_label("Filter by name")
    expect(search).to_be_visible()
    search.click()
    search.fill("citations")
    expect(alice.locator("#model option")).to_have_count(1)
    expect(alice.get_by_label("Model")).to_have_value(re.compile(r":emulator/citations$"))
    box = alice.get_by_label("Message").bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= 390


def test_a_new_chat_starts_on_the_model_last_used(alice: Any) -> None:
    finished(alice, "Cite something", "emulator/citations")
    alice.get_by_role("link", name="New chat", exact=True).click()
    expect(alice).to_have_url(re.compile(r"/$"))
    expect(alice.get_by_label("Model")).to_have_value(re.compile(r":emulator/citations$"))
    expect(alice.locator("[data-selected-model]")).to_have_text("Emulator: citations")
    finished(alice, "Echo this", "emulator/echo")
    alice.goto(alice.url.rsplit("/c/", 1)[0] + "/")
    expect(alice.get_by_label("Model")).to_have_value(re.compile(r":emulator/echo$"))


def test_a_model_that_calls_tools_with_none_on_says_so_before_sending(
    alice: Any, no_defaults: None
) -> None:
    note = alice.locator("#composer [data-tools-note]")
    choose_model(alice, "emulator/echo")
    expect(note).to_be_hidden()
    choose_model(alice, "emulator/tools")
    expect(note).to_be_visible()
    expect(note).to_contain_text(
        "This model answers by calling a tool, and no tools are on for this chat"
    )
    screenshots(alice, "tools-note")
    note.get_by_role("button", name="Turn tools on").click()
    calculator = alice.locator("#composer").get_by_role("checkbox", name="Calculator")
    expect(calculator).to_be_focused()
    calculator.check()
    expect(note).to_be_hidden()
    expect(alice.locator("#new-chat-applied")).to_have_text("tools: calculator")
    calculator.uncheck()
    expect(note).to_be_visible()


def test_a_conversation_with_no_tools_says_so_too(alice: Any) -> None:
    finished(alice, "hello", "emulator/echo")
    note = alice.locator("#composer [data-tools-note]")
    choose_model(alice, "emulator/tools")
    expect(note).to_contain_text("This model answers by calling a tool, and no tools are on:")
    note.get_by_role("button", name="Turn tools on").click()
    header = alice.locator("header.chat-header")
    calculator = header.get_by_role("checkbox", name="Calculator")
    expect(calculator).to_be_focused()
    calculator.check()
    expect(note).to_be_visible()  # until they are saved
    header.get_by_role("button", name="Save settings").click()
    expect(header.locator(".settings-applied")).to_have_text("tools: calculator")
    expect(note).to_be_hidden()
