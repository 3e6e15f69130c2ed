"""Answer settings in real Chromium: set in the conversation header, where one line then says what
applies; defaults for new chats from the sidebar; and what the gateway receives once they apply.

With `CHAT_SCREENSHOTS` set to a directory, the header is saved there with the settings open and
applied, at desktop and phone sizes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from .conftest import ROOT, screenshots, send

pytestmark = [pytest.mark.browser]

APPLIED = "System prompt · temperature 0.7 · max 2,048 tokens · effort high"
SYSTEM = "Answer in French."


@pytest.fixture
def no_defaults(server_env: dict[str, str]) -> Iterator[None]:
    """alice's defaults are cleared afterwards, so that other modules' requests are as they were."""
    yield
    code = "from chatapp.assistants.models import ChatDefaults; ChatDefaults.objects.all().delete()"
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", code]
    subprocess.run(command, env=server_env, cwd=ROOT, check=True, capture_output=True)


def finished(answer: Any) -> Any:
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    return answer


def sent_with(bodies: list[dict[str, Any]], question: str) -> dict[str, Any]:
    """The request whose last message is `question`, once the emulator has it."""

    def found() -> dict[str, Any] | None:
        return next((b for b in bodies if b["messages"][-1]["content"] == question), None)

    return poll(found, what=f"a request asking {question!r}")


def fill_settings(form: Any) -> None:
    form.get_by_label("System prompt").fill(SYSTEM)
    form.get_by_label("Temperature").fill("0.7")
    form.get_by_label("Max tokens").fill("2048")
    form.get_by_label("Reasoning effort").select_option("high")


def set_in_header(page: Any) -> Any:
    """Open the header's Settings, set every one, save; the header's line of what applies."""
    header = page.locator("header.chat-header")
    header.get_by_text("Settings", exact=True).click()
    form = header.locator("form.settings-form")
    expect(form).to_be_visible()
    fill_settings(form)
    screenshots(page, "open")
    form.get_by_role("button", name="Save settings").click()
    line = header.locator(".settings-applied")
    expect(line).to_have_text(APPLIED)
    return line


def test_settings_are_set_in_the_header_which_then_says_what_applies(alice: Any) -> None:
    finished(send(alice, "Why is the sea salty?", "emulator/echo"))
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    line = alice.locator("header.chat-header .settings-applied")
    expect(line).to_have_text("Gateway defaults")
    set_in_header(alice)
    expect(alice.locator("header.chat-header form.settings-form")).to_be_hidden()
    screenshots(alice, "applied")
    alice.reload()
    expect(line).to_have_text(APPLIED)
    alice.locator("header.chat-header").get_by_text("Settings", exact=True).click()
    expect(alice.get_by_label("Temperature")).to_have_value("0.7")
    expect(alice.get_by_label("System prompt")).to_have_value(SYSTEM)


def test_a_temperature_out_of_range_is_refused_before_sending(alice: Any) -> None:
    finished(send(alice, "hello", "emulator/echo"))
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    header = alice.locator("header.chat-header")
    header.get_by_text("Settings", exact=True).click()
    temperature = header.get_by_label("Temperature")
    temperature.fill("3")
    header.get_by_role("button", name="Save settings").click()
    assert temperature.evaluate("el => el.validity.rangeOverflow")
    expect(header.locator(".settings-applied")).to_have_text("Gateway defaults")


def test_the_settings_set_in_the_header_reach_the_gateway(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    finished(send(alice, "Why is the sea salty?", "emulator/echo"))
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    set_in_header(alice)
    finished(send(alice, "And the Dead Sea?", "emulator/echo"))
    body = sent_with(received, "And the Dead Sea?")
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 2048
    assert body["reasoning"] == {"effort": "high"}, "the default gateway is Numes"
    first = sent_with(received, "Why is the sea salty?")
    assert first["messages"][0]["role"] == "user", "the first answer had no settings"
    assert "temperature" not in first


def test_defaults_for_new_chats_are_set_from_the_sidebar(alice: Any, no_defaults: None) -> None:
    alice.get_by_role("link", name="Chat defaults").click()
    expect(alice.get_by_role("heading", name="Defaults for new chats")).to_be_visible()
    form = alice.locator("form.settings-form")
    fill_settings(form)
    form.get_by_role("button", name="Save defaults").click()
    expect(alice.get_by_role("status")).to_have_text("Saved. New chats start with these settings.")
    expect(alice.get_by_text(f"Now: {APPLIED}")).to_be_visible()
    expect(alice.get_by_label("Max tokens")).to_have_value("2048")
    screenshots(alice, "defaults")


def test_a_new_chat_starts_with_the_defaults_and_sends_them(
    alice: Any, received: list[dict[str, Any]], no_defaults: None
) -> None:
    alice.get_by_role("link", name="Chat defaults").click()
    fill_settings(alice.locator("form.settings-form"))
    alice.get_by_role("button", name="Save defaults").click()
    expect(alice.get_by_role("status")).to_have_text("Saved. New chats start with these settings.")
    alice.get_by_role("link", name="Back to the chat").click()
    finished(send(alice, "Defaults, please", "emulator/echo"))
    expect(alice.locator("header.chat-header .settings-applied")).to_have_text(APPLIED)
    body = sent_with(received, "Defaults, please")  # the new chat's early request
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert (body["temperature"], body["max_tokens"]) == (0.7, 2048)
    assert body["reasoning"] == {"effort": "high"}
