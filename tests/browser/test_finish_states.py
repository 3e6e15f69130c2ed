"""How an answer ended, in words, in real Chromium: cut off at the token budget, or out of budget
while thinking, and "Continue with a larger budget" answering in full.

The `length` scenario's default budget (48 tokens) ends it; on tiny-3b, which streams no
reasoning, the answer itself is cut, so the module adds a tiny-3b gateway on the paced emulator.
With `CHAT_SCREENSHOTS` set to a directory, the states are saved there at desktop and phone sizes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from .conftest import added_gateway, screenshots, send

pytestmark = [pytest.mark.browser]

CUT_OFF = "The answer was cut off at the token budget"
THOUGHT_ONLY = "The token budget ran out while the model was thinking, before it answered."


@pytest.fixture(scope="module")
def tiny_gateway(
    browser: Any, server_url: str, server_env: dict[str, str], paced_emulator: str
) -> Iterator[int]:
    """A tiny-3b gateway on the paced emulator (with a key of its own), withdrawn afterwards."""
    fields = {
        "base_url": f"{paced_emulator}/tiny/v1",
        "dialect": "tiny",
        "cost_unit": "credits",
        "enabled": True,
    }
    with added_gateway(browser, server_url, server_env, "tiny-3b", fields) as pk:
        yield pk


def finished(answer: Any) -> Any:
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    return answer


def choose_on(page: Any, gateway_pk: int, model: str) -> None:
    """Pick `model` on gateway `gateway_pk`, reloading until the server lists that gateway (on
    the first load: another process added it, which the server's next page reads)."""
    value = f"g{gateway_pk}:{model}"

    def listed() -> bool:
        if page.locator(f'#model option[value="{value}"]').count():
            return True
        page.reload()
        return False

    poll(listed, what=f"the picker to list {value}", within=30)
    page.get_by_label("Model").select_option(value)


def _last_answer_in_view(page: Any) -> None:
    page.locator("article.assistant").last.scroll_into_view_if_needed()


def test_an_answer_cut_at_the_budget_says_so(alice: Any, tiny_gateway: int) -> None:
    choose_on(alice, tiny_gateway, "emulator/length")
    alice.get_by_label("Message").fill("Why is the sea salty?")
    alice.get_by_label("Message").press("Enter")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = finished(alice.locator("article.assistant").last)
    expect(answer.locator(".content")).to_contain_text("Let me think about")
    expect(answer.locator(".finish-note")).to_have_text(re.compile(rf"^{CUT_OFF}\b.*\.$"))
    expect(answer.get_by_role("button", name="Continue with a larger budget")).to_have_count(0)
    expect(answer.get_by_role("button", name="Retry")).to_have_count(0)
    screenshots(alice, "cut-off", _last_answer_in_view)


@pytest.mark.paced
def test_thinking_out_of_budget_continues_with_a_larger_one(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    send(alice, "Why is the sea salty?", "emulator/length")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    cut = finished(alice.locator("article.assistant").last)
    expect(cut.locator(".finish-note")).to_have_text(THOUGHT_ONLY)
    expect(cut.locator("details.reasoning-pane")).to_contain_text("Let me think about")
    assert cut.locator(".content").inner_text().strip() == ""
    more = cut.get_by_role("button", name="Continue with a larger budget")
    expect(more).to_be_visible()
    screenshots(alice, "thinking-ran-out", _last_answer_in_view)

    more.click()
    expect(alice.locator("article.assistant")).to_have_count(1)
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "streaming")
    answer = finished(answer)
    expect(answer.locator(".content h2")).to_contain_text("About")
    expect(answer.locator("details.reasoning-pane")).to_contain_text("Let me think about")
    expect(answer.locator(".finish-note")).to_have_count(0)
    expect(answer.get_by_role("button", name="Continue with a larger budget")).to_have_count(0)
    # What the gateway was asked: its own default budget, then Osmexo's safe default of 4,096.
    first, second = (body for body in received if body["model"] == "emulator/length")
    assert "max_tokens" not in first
    assert second["max_tokens"] == 4096
    screenshots(alice, "continued", _last_answer_in_view)
