"""The composer in real Chromium: the user's own message is on the page the moment it is sent,
replaced by the server's copy without a duplicate, and a send that fails keeps the draft.

The send POST is held by a Playwright route, so "at once" is observable without timing: the
message must be shown while the server has not even received the request.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from chatapp.conversations.turns import BUSY
from tests.waiting import poll

from .conftest import choose_model, finished

pytestmark = [pytest.mark.browser]

NEW_CHAT_SEND = re.compile(r"/c/new/send/$")
FOLLOW_UP_SEND = re.compile(r"/c/\d+/send/$")


def hold_sends(page: Any, pattern: re.Pattern[str]) -> list[Any]:
    """Hold every request to `pattern` until the test releases it; the held routes."""
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)

    page.route(pattern, hold)
    return held


def first_held(page: Any, held: list[Any]) -> Any:
    # Each evaluate lets Playwright deliver the page's events, the held route among them.
    return poll(lambda: page.evaluate("0") == 0 and held and held[0], what="the held send")


def type_and_send(page: Any, text: str) -> None:
    box = page.locator("#message")
    box.fill(text)
    box.press("Enter")


def test_a_new_chat_shows_the_message_before_the_server_answers_then_its_copy_once(
    alice: Any,
) -> None:
    held = hold_sends(alice, NEW_CHAT_SEND)
    choose_model(alice, "emulator/echo")
    type_and_send(alice, "Hello at once")
    shown = alice.locator("#messages > article.user")
    expect(shown).to_have_count(1)
    expect(shown).to_have_class(re.compile(r"\bpending\b"))
    expect(shown).to_have_text("Hello at once")
    expect(alice.locator("#message")).to_have_value("")
    expect(alice.locator(".first-screen")).to_be_hidden()
    first_held(alice, held).continue_()  # only now does the server see the request
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(shown).to_have_count(1)
    expect(shown).not_to_have_class(re.compile(r"\bpending\b"))
    expect(shown).to_have_attribute("data-message", re.compile(r"^\d+$"))
    expect(shown.locator(".content")).to_have_text("Hello at once")
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed")
    expect(shown).to_have_count(1)


def test_a_follow_up_shows_at_once_and_is_replaced_by_the_servers_copy(alice: Any) -> None:
    finished(alice, "The first question")
    held = hold_sends(alice, FOLLOW_UP_SEND)
    type_and_send(alice, "The follow-up")
    users = alice.locator("#messages > article.user")
    expect(users).to_have_count(2)
    expect(users.last).to_have_class(re.compile(r"\bpending\b"))
    expect(users.last).to_have_text("The follow-up")
    first_held(alice, held).continue_()
    expect(alice.locator("#messages > article.assistant")).to_have_count(2)
    expect(alice.locator("#messages > article.user.pending")).to_have_count(0)
    expect(users).to_have_count(2)
    assert [text.strip() for text in users.locator(".content").all_inner_texts()] == [
        "The first question",
        "The follow-up",
    ]
    expect(users.last).to_have_attribute("data-message", re.compile(r"^\d+$"))
    expect(alice.locator("article.assistant").last).to_have_attribute("data-status", "completed")


@pytest.mark.parametrize(
    ("fail", "says"),
    [
        pytest.param(lambda route: route.abort(), "could not be reached", id="no-connection"),
        pytest.param(
            lambda route: route.fulfill(status=500, body="boom"), "answered 500", id="status-500"
        ),
    ],
)
def test_a_failed_send_takes_the_message_back_and_keeps_the_draft(
    alice: Any, fail: Any, says: str
) -> None:
    held = hold_sends(alice, NEW_CHAT_SEND)
    choose_model(alice, "emulator/echo")
    type_and_send(alice, "Keep this draft")
    expect(alice.locator("#messages > article.user.pending")).to_have_count(1)
    fail(first_held(alice, held))
    expect(alice.locator("#messages > article.user")).to_have_count(0)
    expect(alice.locator("#message")).to_have_value("Keep this draft")
    expect(alice.locator("#composer-error")).to_contain_text(f"Not sent: the server {says}")
    expect(alice.locator(".first-screen")).to_be_visible()
    # The draft sends as it is once the server can be reached.
    alice.unroute(NEW_CHAT_SEND)
    alice.locator("#message").press("Enter")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(alice.locator("#messages > article.user")).to_have_count(1)
    expect(alice.locator("#messages > article.user .content")).to_have_text("Keep this draft")
    expect(alice.locator("#composer-error")).to_have_text("")


@pytest.mark.paced
def test_a_refusal_in_words_keeps_the_draft_under_the_servers_reason(alice: Any) -> None:
    finished(alice, "A question")
    other = alice.context.new_page()
    other.goto(alice.url)
    expect(other.locator("body")).to_have_attribute("data-socket", "open")
    choose_model(alice, "emulator/long")
    alice.locator("article.assistant").first.get_by_role("button", name="Regenerate").click()
    running = alice.locator("article.assistant")
    expect(running).to_have_attribute("data-status", "streaming")
    # The other tab shows the old version, with no answer being written in it: a send from it
    # goes to the server (not queued), which refuses it in words while the new one is written.
    type_and_send(other, "Sent while the answer is written")
    expect(other.locator("#composer-error")).to_contain_text(BUSY)
    expect(other.locator("#composer-error")).not_to_contain_text("Not sent")
    expect(other.locator("#message")).to_have_value("Sent while the answer is written")
    expect(other.locator("#messages > article.user")).to_have_count(1)
    alice.keyboard.press("Escape")  # stop the long answer
    expect(running).to_have_attribute("data-status", "cancelled")
    other.close()
