"""A message sent while an answer is written, in real Chromium against Daphne and the paced
emulator (its `echo` answers at 40 tokens a second, so an answer of a few hundred words streams
for seconds): it is queued, shown as queued with a Cancel, nothing of it reaches the gateway, and
it is sent when the answer ends; a cancelled one is never sent and its text is back in the box.

Set `CHAT_SCREENSHOTS` to a directory to keep screenshots of a queued message (1280x800 and
390x844).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import finished, screenshots, send

# The answer must still be streaming when the second message is sent: the emulator paced.
pytestmark = [pytest.mark.browser, pytest.mark.paced]

WORDS = " ".join(f"w{n:03d}" for n in range(1, 201))  # echoed back in ~5 s at 40 tokens/s


def asked(bodies: list[dict[str, Any]], text: str) -> int:
    """How many chat requests the gateway received whose last message is `text`."""
    return sum(1 for body in bodies if body["messages"][-1]["content"] == text)


def test_a_message_sent_while_an_answer_streams_is_queued_and_sent_when_it_ends(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    finished(alice, "warm up")
    answer = send(alice, WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "streaming")
    composer = alice.locator("#composer")
    queue_button = composer.get_by_role("button", name="Queue")
    expect(queue_button).to_be_hidden()  # nothing typed yet: Stop alone
    box = alice.get_by_label("Message", exact=True)
    box.fill("And the second question")
    expect(queue_button).to_be_visible()
    box.press("Enter")

    queued = composer.locator(".queued-message")
    expect(queued).to_have_count(1)
    expect(queued).to_contain_text("Queued: sends when the answer ends")
    expect(queued.locator(".queued-text")).to_have_text("And the second question")
    expect(box).to_have_value("")
    expect(alice.locator("#composer-error")).to_be_empty()  # not refused
    screenshots(alice, "queued-message")
    expect(answer).to_have_attribute("data-status", "streaming")  # still writing while queued
    assert asked(received, "And the second question") == 0
    expect(alice.locator("article.user")).to_have_count(2)

    box.fill("a draft typed meanwhile")
    expect(answer).to_have_attribute("data-status", "completed")
    expect(alice.locator("article.user")).to_have_count(3)
    expect(alice.locator("article.user").last.locator(".content")).to_have_text(
        "And the second question"
    )
    expect(queued).to_have_count(0)
    expect(box).to_have_value("a draft typed meanwhile")  # the draft stays
    last = alice.locator("article.assistant").last
    expect(last).to_have_attribute("data-status", "completed")
    expect(last.locator(".content")).to_have_text("And the second question")
    assert asked(received, "And the second question") == 1, "sent once"


def test_a_cancelled_queued_message_is_not_sent(alice: Any, received: list[dict[str, Any]]) -> None:
    finished(alice, "warm up")
    answer = send(alice, WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "streaming")
    box = alice.get_by_label("Message", exact=True)
    box.fill("Never mind this one")
    box.press("Enter")
    queued = alice.locator("#composer .queued-message")
    expect(queued).to_have_count(1)
    queued.get_by_role("button", name="Cancel the queued message: Never mind this one").click()
    expect(queued).to_have_count(0)
    expect(box).to_have_value("Never mind this one")  # back to edit, not lost
    expect(answer).to_have_attribute("data-status", "completed")
    expect(alice.locator("article.user")).to_have_count(2)
    assert asked(received, "Never mind this one") == 0
    expect(box).to_have_value("Never mind this one")
