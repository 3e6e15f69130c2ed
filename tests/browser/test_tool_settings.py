"""The Tools control in real Chromium: a tool ticked in the conversation's Settings is saved, said
in the line of what applies, and still ticked after a reload.

With `CHAT_SCREENSHOTS` set to a directory, the Settings panel with its tools is saved there at
desktop and phone sizes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import screenshots, send
from .test_answer_settings import finished

pytestmark = [pytest.mark.browser]


def test_a_tool_ticked_in_the_settings_is_saved(alice: Any) -> None:
    finished(send(alice, "What is 6 times 7?", "emulator/echo"))
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    header = alice.locator("header.chat-header")
    header.get_by_text("Settings", exact=True).click()
    tools = header.get_by_role("group", name="Tools")
    expect(tools).to_be_visible()
    expect(tools.get_by_role("checkbox")).to_have_count(3)
    calculator = tools.get_by_role("checkbox", name="Calculator")
    expect(calculator).not_to_be_checked()
    calculator.check()
    screenshots(alice, "tools-open")
    header.get_by_role("button", name="Save settings").click()
    line = header.locator(".settings-applied")
    expect(line).to_have_text("tools: calculator")
    expect(header.locator("form.settings-form")).to_be_hidden()
    alice.reload()
    expect(line).to_have_text("tools: calculator")
    header.get_by_text("Settings", exact=True).click()
    expect(tools.get_by_role("checkbox", name="Calculator")).to_be_checked()
    expect(tools.get_by_role("checkbox", name="Date and time")).not_to_be_checked()
