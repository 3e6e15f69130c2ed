"""Branches in real Chromium: Retry and Regenerate make a new version of that answer in its place,
with the model in the picker; Edit resends a question as a new version; the arrows around "1 / 2"
switch between versions; the gateway is sent the branch shown; and the composer offers Stop, not
Send, while an answer is written.

What the gateway was asked is read from the emulator (`received`); `emulator/echo` answers with
the last user message verbatim. With `CHAT_SCREENSHOTS` set to a directory, a conversation with
versions and an edit in progress are saved there at desktop and phone sizes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from . import conftest
from .conftest import choose_model, content, send, sign_in, wait_for_text

pytestmark = [pytest.mark.browser]

BUSY = "An answer is still being written in this conversation; stop it or wait for it to finish."
TWO = "\n".join(f"two, line {n}" for n in range(1, 41))  # more than a window holds
TWO_WORDS = " ".join(TWO.split())
# The messages scroll, and their end is in view.
AT_THE_END = """() => {
    const box = document.getElementById("messages");
    const below = box.scrollHeight - box.scrollTop - box.clientHeight;
    return box.scrollHeight > box.clientHeight && below < 2;
}"""
NEWER = "This conversation has new messages: they are shown now; send again to continue."
WORDS = " ".join(f"w{n:03d}" for n in range(1, 321))  # echoed back in ~8 s at 40 tokens/s
# Echoed back in ~40 s: an answer certain to be still streaming when a loaded machine gets to Esc.
LONG_WORDS = " ".join(f"w{n:04d}" for n in range(1, 1601))
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}


def finished(answer: Any) -> Any:
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    return answer


def answered(page: Any, text: str, model: str = "emulator/echo") -> Any:
    """Send `text` and wait for its answer to end; the answer."""
    answer = send(page, text, model)
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    return finished(answer)


def asked(bodies: list[dict[str, Any]], since: int = 0) -> list[dict[str, Any]]:
    """The messages of the first chat request received after the first `since`."""
    poll(lambda: len(bodies) > since, what="the gateway to be asked")
    return list(bodies[since]["messages"])


def said(*texts: str) -> list[dict[str, str]]:
    """A context in which each question was echoed back: (user, assistant) pairs, then the last
    question."""
    context = []
    for text in texts[:-1]:
        context += [{"role": "user", "content": text}, {"role": "assistant", "content": text}]
    return [*context, {"role": "user", "content": texts[-1]}]


def shown(page: Any) -> list[str]:
    """The text of every message on the page, in order."""
    return [text.strip() for text in page.locator("article.message > .content").all_inner_texts()]


def end_in_view(page: Any) -> None:
    """The messages scrolled to their end (for a picture taken at another size)."""
    page.locator("#messages").evaluate("box => { box.scrollTop = box.scrollHeight; }")


def words(page: Any) -> list[str]:
    """The words of every message on the page, in order (a line break is a space)."""
    return [" ".join(text.split()) for text in shown(page)]


def versions(message: Any, position: int, count: int) -> Any:
    group = message.get_by_role("group", name=f"Version {position} of {count}")
    expect(group).to_have_text(re.compile(rf"{position} / {count}"))
    return group


def composer_buttons(page: Any) -> tuple[Any, Any]:
    composer = page.locator("#composer")
    send_button = composer.get_by_role("button", name="Send", exact=True)
    return send_button, composer.get_by_role("button", name="Stop")


def screenshots(page: Any, name: str, editing: str | None = None) -> None:
    """The conversation `page` shows, loaded at each size in a tab of its own, its end in view;
    `editing`: with that text being written into its last question's Edit."""
    directory = os.environ.get("CHAT_SCREENSHOTS")
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    for label, (width, height) in SIZES.items():
        shot = page.context.new_page()
        shot.set_viewport_size({"width": width, "height": height})
        shot.goto(page.url)
        expect(shot.locator("body")).to_have_attribute("data-socket", "open")
        focus = shot.locator("article.message").last
        if editing is not None:
            focus = shot.locator("article.user").last
            focus.get_by_role("button", name="Edit").click()
            focus.get_by_role("textbox", name="Edited text").fill(editing)
        focus.scroll_into_view_if_needed()
        shot.screenshot(path=str(Path(directory) / f"{name}-{label}.png"))
        shot.close()


# --- The bugs of issue 11 -------------------------------------------------------------------------


@pytest.mark.paced
def test_retry_on_an_earlier_answer_regenerates_that_answer_in_its_place(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    first = send(alice, "apples", "emulator/chat")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    first = alice.locator("article.assistant").first
    wait_for_text(first, minimum=20)
    first.get_by_role("button", name="Stop").click()
    expect(first).to_have_attribute("data-status", "cancelled")
    stopped = first.get_attribute("data-message")
    finished(send(alice, "bananas", "emulator/chat"))
    before = len(received)

    first.get_by_role("button", name="Retry").click()
    assert asked(received, before) == [{"role": "user", "content": "apples"}]
    # The new version takes the stopped answer's place; the turn after it is another branch.
    expect(alice.locator("article.message")).to_have_count(2)
    answer = alice.locator("article.assistant")
    expect(answer).not_to_have_attribute("data-message", stopped or "")
    finished(answer)
    expect(answer.locator(".content h2")).to_have_text("About “apples”")
    versions(answer, 2, 2)
    alice.reload()
    expect(alice.locator("article.message")).to_have_count(2)
    expect(alice.locator("article.assistant .content h2")).to_have_text("About “apples”")


def test_retry_uses_the_model_chosen_in_the_picker(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    failed = send(alice, "hello there", "emulator/error-before")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(failed).to_have_attribute("data-status", "failed", timeout=15_000)
    before = len(received)
    choose_model(alice, "emulator/echo")
    failed.get_by_role("button", name="Retry").click()
    poll(lambda: len(received) > before, what="the retry to reach the gateway")
    assert received[before]["model"] == "emulator/echo"
    answer = alice.locator("article.assistant")
    expect(answer).to_have_count(1)
    finished(answer)
    assert content(answer).strip() == "hello there"
    expect(answer.locator(".meta")).to_contain_text("emulator/echo")
    # The failed attempt is kept with its own generation: one version back.
    answer.get_by_role("button", name="Previous version").click()
    expect(answer).to_have_attribute("data-status", "failed")
    expect(answer.locator(".meta")).to_contain_text("emulator/error-before")
    versions(answer, 1, 2)


@pytest.mark.paced
def test_the_composer_offers_stop_instead_of_send_while_an_answer_is_written(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    answered(alice, "warm up")
    send_button, stop_button = composer_buttons(alice)
    expect(send_button).to_be_visible()
    expect(stop_button).to_be_hidden()
    answer = send(alice, LONG_WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "streaming")
    expect(send_button).to_be_hidden()
    expect(stop_button).to_be_visible()
    screenshots(alice, "streaming")

    # A second message now is queued (test_queued_message.py), and nothing reaches the gateway.
    box = alice.get_by_label("Message", exact=True)
    box.fill("a second question")
    box.press("Enter")
    expect(alice.locator("#composer .queued-message")).to_have_count(1)
    expect(alice.locator("#composer-error")).to_be_empty()
    expect(alice.locator("article.user")).to_have_count(2)
    assert all(body["messages"][-1]["content"] != "a second question" for body in received)

    # Esc stops the answer, which lets the queued message go; Stop shows while its answer runs.
    alice.keyboard.press("Escape")
    expect(answer).to_have_attribute("data-status", "cancelled")
    expect(alice.locator("#composer .queued-message")).to_have_count(0)
    expect(alice.locator("#composer-error")).to_be_empty()
    expect(alice.locator("article.user")).to_have_count(3)
    expect(alice.locator("article.user").last).to_contain_text("a second question")
    finished(alice.locator("article.assistant").last)
    expect(send_button).to_be_visible()  # learnt from the answer's `done`
    expect(stop_button).to_be_hidden()


# --- Branches -------------------------------------------------------------------------------------


def test_regenerate_makes_a_version_in_place_and_the_arrows_switch_versions(alice: Any) -> None:
    answered(alice, "one")
    answered(alice, "two")
    choose_model(alice, "emulator/chat")
    alice.locator("article.assistant").first.get_by_role("button", name="Regenerate").click()
    expect(alice.locator("article.message")).to_have_count(2)
    answer = alice.locator("article.assistant")
    finished(answer)
    expect(answer.locator(".content h2")).to_have_text("About “one”")
    expect(answer.locator(".meta")).to_contain_text("emulator/chat")
    group = versions(answer, 2, 2)
    expect(group.get_by_role("button", name="Next version")).to_be_disabled()
    screenshots(alice, "regenerated")

    group.get_by_role("button", name="Previous version").click()
    assert poll(lambda: shown(alice) == ["one", "one", "two", "two"], what="the first version")
    first = alice.locator("article.assistant").first
    expect(first.locator(".meta")).to_contain_text("emulator/echo")
    group = versions(first, 1, 2)
    expect(group.get_by_role("button", name="Next version")).to_be_focused()
    alice.reload()  # the version shown is the conversation's
    assert shown(alice) == ["one", "one", "two", "two"]
    alice.locator("article.assistant").first.get_by_role("button", name="Next version").click()
    expect(alice.locator("article.message")).to_have_count(2)
    versions(alice.locator("article.assistant"), 2, 2)


def test_edit_resends_a_question_as_a_new_version(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    answered(alice, "apples")
    question = alice.locator("article.user")
    question.get_by_role("button", name="Edit").click()
    box = question.get_by_role("textbox", name="Edited text")
    expect(box).to_have_value("apples")
    expect(box).to_be_focused()
    question.get_by_role("button", name="Cancel").click()
    expect(box).to_have_count(0)
    expect(question.locator(".content")).to_be_visible()

    question.get_by_role("button", name="Edit").click()
    box.fill("pears and\nplums")
    screenshots(alice, "editing", "pears and\nplums")
    before = len(received)
    question.get_by_role("button", name="Save and send").click()
    expect(alice.locator("article.user > .content")).to_have_text("pears and\nplums")
    assert asked(received, before) == [{"role": "user", "content": "pears and\nplums"}]
    answer = finished(alice.locator("article.assistant"))
    expect(answer.locator(".content")).to_have_text("pears and plums")  # one paragraph
    versions(question, 2, 2)
    question.get_by_role("button", name="Previous version").click()
    assert poll(lambda: shown(alice) == ["apples", "apples"], what="the question as first sent")
    versions(alice.locator("article.user"), 1, 2)


def test_an_edit_is_sent_with_enter_and_cancelled_with_escape(alice: Any) -> None:
    answered(alice, "first")
    question = alice.locator("article.user")
    question.get_by_role("button", name="Edit").click()
    box = question.get_by_role("textbox", name="Edited text")
    box.press("Escape")
    expect(box).to_have_count(0)
    expect(question.get_by_role("button", name="Edit")).to_be_focused()
    question.get_by_role("button", name="Edit").click()
    box.fill("second")
    box.press("Enter")
    expect(alice.locator("article.user > .content")).to_have_text("second")
    answer = finished(alice.locator("article.assistant"))
    assert content(answer).strip() == "second"
    assert shown(alice) == ["second", "second"]


def test_enter_on_the_edit_forms_focused_buttons_presses_them(alice: Any) -> None:
    answered(alice, "first")
    question = alice.locator("article.user")
    question.get_by_role("button", name="Edit").click()
    box = question.get_by_role("textbox", name="Edited text")
    question.get_by_role("button", name="Cancel").focus()
    alice.keyboard.press("Enter")
    expect(box).to_have_count(0)
    expect(question.get_by_role("button", name="Edit")).to_be_focused()

    question.get_by_role("button", name="Edit").click()
    box.fill("second")
    question.get_by_role("button", name="Save and send").focus()
    alice.keyboard.press("Enter")
    expect(alice.locator("article.user > .content")).to_have_text("second")
    finished(alice.locator("article.assistant"))
    assert shown(alice) == ["second", "second"]


@pytest.mark.paced
def test_an_edit_refused_while_an_answer_is_written_says_so_in_the_edit_form(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    answered(alice, "first")
    running = send(alice, LONG_WORDS, "emulator/echo")
    wait_for_text(running)
    question = alice.locator("article.user").first
    question.get_by_role("button", name="Edit").click()
    box = question.get_by_role("textbox", name="Edited text")
    box.fill("first, edited")
    before = len(received)
    question.get_by_role("button", name="Save and send").click()
    refusal = question.locator(".edit-form").get_by_role("alert")
    expect(refusal).to_have_text(BUSY)
    expect(alice.locator("#composer-error")).to_be_empty()
    expect(box).to_have_value("first, edited")  # the edit stays open, as it was
    conftest.screenshots(alice, "edit-refused", lambda page: question.scroll_into_view_if_needed())
    # The refusal goes with the answer, and the edit may be sent then.
    _, stop_button = composer_buttons(alice)
    stop_button.click()
    expect(running).to_have_attribute("data-status", "cancelled")
    expect(refusal).to_be_empty()
    question.get_by_role("button", name="Save and send").click()
    assert asked(received, before) == [{"role": "user", "content": "first, edited"}]
    expect(alice.locator("article.message")).to_have_count(2)  # the edit's branch swapped in
    finished(alice.locator("article.assistant"))
    assert shown(alice) == ["first, edited", "first, edited"]


def test_the_context_sent_follows_the_branch_shown(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    answered(alice, "one")
    answered(alice, "two")
    second = alice.locator("article.user").nth(1)
    second.get_by_role("button", name="Edit").click()
    before = len(received)
    second.get_by_role("textbox", name="Edited text").fill("deux")
    second.get_by_role("button", name="Save and send").click()
    assert asked(received, before) == said("one", "deux")
    expect(alice.locator("article.user > .content").last).to_have_text("deux")
    finished(alice.locator("article.assistant").last)

    alice.locator("article.user").nth(1).get_by_role("button", name="Previous version").click()
    assert poll(lambda: shown(alice) == ["one", "one", "two", "two"], what="the first branch")
    before = len(received)
    finished(send(alice, "three", "emulator/echo"))
    assert asked(received, before) == said("one", "two", "three")

    alice.locator("article.user").nth(1).get_by_role("button", name="Next version").click()
    assert poll(lambda: shown(alice) == ["one", "one", "deux", "deux"], what="the edited branch")
    before = len(received)
    finished(send(alice, "trois", "emulator/echo"))
    assert asked(received, before) == said("one", "deux", "trois")
    screenshots(alice, "versions-and-edit", "trois, mais plus long\net sur deux lignes")

    # A new version of the first answer is asked from what came before it alone.
    before = len(received)
    alice.locator("article.assistant").first.get_by_role("button", name="Regenerate").click()
    assert asked(received, before) == [{"role": "user", "content": "one"}]
    expect(alice.locator("article.message")).to_have_count(2)
    finished(alice.locator("article.assistant"))
    assert shown(alice) == ["one", "one"]


@pytest.mark.paced
def test_a_new_version_streams_across_a_reload_and_stops_while_a_tab_on_the_old_one_waits(
    alice: Any,
) -> None:
    failed = send(alice, WORDS, "emulator/error-before")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(failed).to_have_attribute("data-status", "failed", timeout=15_000)
    other = alice.context.new_page()
    other.goto(alice.url)
    expect(other.locator("body")).to_have_attribute("data-socket", "open")

    choose_model(alice, "emulator/echo")
    failed.get_by_role("button", name="Retry").click()
    answer = alice.locator("article.assistant")
    expect(answer).to_have_attribute("data-status", "streaming")
    wait_for_text(answer, minimum=40)
    # The other tab shows the old version and nothing of the new one; a send from it is refused.
    expect(other.locator("article.assistant")).to_have_attribute("data-status", "failed")
    other.get_by_label("Message", exact=True).fill("from the other tab")
    other.get_by_label("Message", exact=True).press("Enter")
    expect(other.locator("#composer-error")).to_have_text(BUSY)
    assert "w001" not in content(other.locator("article.assistant"))

    alice.reload()
    answer = alice.locator("article.assistant")
    expect(answer).to_have_attribute("data-status", "streaming")
    versions(answer, 2, 2)
    wait_for_text(answer, minimum=len(content(answer).strip()) + 8)  # still arriving
    _, stop_button = composer_buttons(alice)
    expect(other.locator("#composer-error")).to_have_text(BUSY)  # while the answer runs
    stop_button.click()
    expect(answer).to_have_attribute("data-status", "cancelled")
    expect(other.locator("#composer-error")).to_be_empty()  # the refusal went with the answer
    text = content(answer).strip()
    assert text
    assert WORDS.startswith(text)
    assert len(text) < len(WORDS)
    other.reload()
    expect(other.locator("article.assistant")).to_have_attribute("data-status", "cancelled")
    assert content(other.locator("article.assistant")).strip() == text
    other.close()


def test_a_tab_behind_the_conversation_catches_up_instead_of_forking_it(
    alice: Any, browser: Any, server_url: str, received: list[dict[str, Any]]
) -> None:
    answered(alice, "one")
    other = sign_in(browser, server_url, "alice")  # the same user in another window
    try:
        other.goto(alice.url)
        expect(other.locator("body")).to_have_attribute("data-socket", "open")
        answered(alice, TWO)
        assert shown(other) == ["one", "one"]  # this tab has not seen "two"

        box = other.get_by_label("Message", exact=True)
        box.fill("three")
        before = len(received)
        box.press("Enter")
        expect(other.locator("#composer-error")).to_have_text(NEWER)
        assert poll(
            lambda: words(other) == ["one", "one", TWO_WORDS, TWO_WORDS], what="the tab caught up"
        )
        assert other.evaluate(AT_THE_END), "the new end in view"
        expect(box).to_have_value("three")  # kept, to send again
        expect(box).to_be_focused()
        assert len(received) == before, "nothing was asked of the gateway"
        conftest.screenshots(other, "caught-up", end_in_view)

        before = len(received)
        box.press("Enter")
        finished(other.locator("article.assistant").nth(2))
        assert asked(received, before) == said("one", TWO, "three")
        expect(other.locator("#composer-error")).to_have_text("")
        assert words(other) == ["one", "one", TWO_WORDS, TWO_WORDS, "three", "three"]
        expect(other.locator(".versions")).to_have_count(0)  # no "2 / 2" anywhere

        # The first tab is behind now; a retry there is a new version, asked for, and goes ahead.
        alice.locator("article.assistant").first.get_by_role("button", name="Regenerate").click()
        finished(alice.locator("article.assistant").first)
        versions(alice.locator("article.assistant").first, 2, 2)
        expect(alice.locator("#composer-error")).to_have_text("")
    finally:
        other.context.close()
