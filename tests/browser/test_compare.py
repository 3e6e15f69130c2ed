"""Comparing two models in real Chromium: "+ Compare" adds a second picker, one message streams
from both at once side by side (re-attached after a reload), Stop on one leaves the other
running, and "Continue with this" goes on from the chosen answer with the other as its version.

`emulator/echo` answers with the message sent, `emulator/long` with a few thousand tokens, both
paced at 40 tokens/s, so neither ends before the test has seen both stream. With
`CHAT_SCREENSHOTS` set, the comparison streaming and the answer chosen are saved at desktop
and phone sizes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from .conftest import choose_model, content, screenshots, wait_for_more_text

pytestmark = [pytest.mark.browser]

WORDS = " ".join(f"w{n:03d}" for n in range(1, 601))  # echoed back in ~15 s at 40 tokens/s
BOTH_STREAMING = """() => {
    const answers = [...document.querySelectorAll(".comparison article.assistant")];
    return answers.length === 2 && answers.every(
        (el) => el.dataset.status === "streaming"
            && el.querySelector(".content").innerText.trim().length > 0);
}"""


def columns(page: Any) -> Any:
    return page.locator(".comparison > .comparison-column > article.assistant")


def compare_with(page: Any, model: str) -> None:
    page.get_by_role("button", name="+ Compare").click()
    option = page.locator(f'#model option[value$=":{model}"]').first
    page.get_by_label("Model 2", exact=True).select_option(option.get_attribute("value"))


def both_streaming(page: Any) -> None:
    """Both answers are streaming and each shows text: neither has ended yet."""
    page.wait_for_function(BOTH_STREAMING)


def grid_in_view(page: Any) -> None:
    page.locator(".comparison").scroll_into_view_if_needed()


@pytest.mark.paced
def test_two_models_stream_side_by_side_and_one_is_chosen(alice: Any) -> None:
    choose_model(alice, "emulator/echo")
    compare_with(alice, "emulator/long")
    expect(alice.get_by_role("button", name="+ Compare")).to_be_visible()  # room for a third
    alice.get_by_label("Message").fill(WORDS)
    alice.get_by_label("Message").press("Enter")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    echo, long = columns(alice).nth(0), columns(alice).nth(1)
    both_streaming(alice)
    expect(alice.get_by_label("Model 2", exact=True)).to_have_count(
        0
    )  # the next message goes to one model
    expect(alice.locator(".comparison-model")).to_have_text(["emulator/echo", "emulator/long"])
    expect(echo.locator(".meta")).to_contain_text("emulator/echo")
    expect(long.locator(".meta")).to_contain_text("emulator/long")
    expect(alice.get_by_label("Model", exact=True)).to_have_value(re.compile(":emulator/echo$"))
    expect(alice.locator("#composer button.stop-answer")).to_be_visible()
    screenshots(alice, "compare-streaming", grid_in_view)

    # A reload re-attaches to both, each going on from where it was.
    alice.reload()
    echo, long = columns(alice).nth(0), columns(alice).nth(1)
    both_streaming(alice)
    wait_for_more_text(echo, len(content(echo)))
    wait_for_more_text(long, len(content(long)))

    # Stop on one: it stops where it is, and the other goes on.
    long.get_by_role("button", name="Stop").click()
    expect(long).to_have_attribute("data-status", "cancelled")
    expect(long.locator(".note")).to_have_text("Stopped.")
    wait_for_more_text(echo, len(content(echo)))
    expect(echo).to_have_attribute("data-status", "completed", timeout=40_000)
    expect(echo.locator(".content.rendered")).to_have_text(WORDS)
    expect(alice.locator("#composer button[type=submit]")).to_be_visible()
    for answer in (echo, long):
        expect(answer.locator(".versions")).to_have_count(0)
        expect(answer.get_by_role("button", name="Regenerate")).to_have_count(0)
        expect(answer.get_by_role("button", name="Continue with this")).to_be_visible()
        expect(answer.locator(".meta")).to_contain_text("$")  # each its own cost

    # Choosing one: the conversation goes on from it, the other kept as its version.
    echo.get_by_role("button", name="Continue with this").click()
    expect(alice.locator(".comparison")).to_have_count(0)
    answer = alice.locator("#messages > article.assistant")
    expect(answer).to_have_count(1)
    expect(answer.locator(".content")).to_have_text(WORDS)
    expect(answer.locator(".version-count")).to_have_text("1 / 2")
    expect(answer.get_by_role("button", name="Regenerate")).to_be_visible()
    screenshots(
        alice,
        "compare-chosen",
        lambda page: answer.locator(".message-footer").scroll_into_view_if_needed(),
    )
    alice.reload()  # as the server has it
    answer = alice.locator("#messages > article.assistant")
    expect(answer.locator(".version-count")).to_have_text("1 / 2")
    answer.get_by_role("button", name="Next version").click()
    answer = alice.locator("#messages > article.assistant")
    expect(answer.locator(".version-count")).to_have_text("2 / 2")
    expect(answer.locator(".meta")).to_contain_text("emulator/long")
    expect(answer.locator(".note")).to_have_text("Stopped.")


def test_at_most_three_models_and_each_can_be_taken_away(alice: Any) -> None:
    add = alice.get_by_role("button", name="+ Compare")
    add.click()
    add.click()
    expect(alice.get_by_label("Model 3", exact=True)).to_be_visible()
    expect(add).to_be_hidden()
    alice.get_by_role("button", name="Stop comparing model 2").click()
    expect(alice.get_by_label("Model 3", exact=True)).to_have_count(0)
    expect(alice.get_by_label("Model 2", exact=True)).to_be_visible()  # the one left is renumbered
    expect(add).to_be_visible()


# Whether each of the composer's pickers shows the whole name of its model, and each remove button
# can be pressed where it is: inside the screen and not under anything.
PICKERS_WHOLE = """() => {
    const measure = document.createElement("canvas").getContext("2d");
    return [...document.querySelectorAll("#composer .picker-row select:is(#model, [name=compare])")]
        .map((select) => {
            const style = getComputedStyle(select);
            measure.font = style.font;
            const text = measure.measureText(select.selectedOptions[0].text).width;
            const room = select.clientWidth - parseFloat(style.paddingLeft)
                - parseFloat(style.paddingRight) - 20;  // the arrow's part
            return {label: select.getAttribute("aria-label") || "Model", whole: room >= text};
        });
}"""
REMOVE_REACHABLE = """() => [...document.querySelectorAll("#composer .remove-compare")].map(el => {
    const box = el.getBoundingClientRect();
    const x = box.left + box.width / 2, y = box.top + box.height / 2;
    return box.left >= 0 && box.right <= innerWidth && box.width > 0
        && document.elementFromPoint(x, y) === el;
})"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_added_pickers_show_their_models_names_and_their_x_on_screen(
    alice: Any, size: str
) -> None:
    width, height = {"desktop": (1280, 800), "phone": (390, 844)}[size]
    alice.set_viewport_size({"width": width, "height": height})
    choose_model(alice, "emulator/echo")
    add = alice.get_by_role("button", name="+ Compare")
    add.click()
    add.click()
    expect(alice.get_by_label("Model 3", exact=True)).to_be_visible()
    assert alice.evaluate(PICKERS_WHOLE) == [
        {"label": label, "whole": True} for label in ("Model", "Model 2", "Model 3")
    ]
    assert alice.evaluate(REMOVE_REACHABLE) == [True, True]
    screenshots(alice, f"compare-pickers-{size}")
    alice.get_by_role("button", name="Stop comparing model 3").click()
    expect(alice.get_by_label("Model 3", exact=True)).to_have_count(0)


def test_continue_with_this_puts_the_chosen_answers_model_in_the_picker(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    choose_model(alice, "emulator/echo")
    compare_with(alice, "emulator/chat")
    alice.get_by_label("Message").fill("Which of you is better?")
    alice.get_by_label("Message").press("Enter")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    chat = columns(alice).nth(1)
    expect(chat.locator(".meta")).to_contain_text("emulator/chat")
    for answer in (columns(alice).nth(0), chat):
        expect(answer).to_have_attribute("data-status", "completed")
    picker = alice.get_by_label("Model", exact=True)
    expect(picker).to_have_value(re.compile(":emulator/echo$"))  # the first column's, so far

    chat.get_by_role("button", name="Continue with this").click()
    expect(alice.locator(".comparison")).to_have_count(0)
    expect(picker).to_have_value(re.compile(":emulator/chat$"))
    received.clear()
    alice.get_by_label("Message").fill("And then?")
    alice.get_by_label("Message").press("Enter")
    expect(alice.locator("#messages > article.assistant")).to_have_count(2)
    poll(lambda: received, what="the follow-up's request")
    assert [body["model"] for body in received] == ["emulator/chat"]
    alice.reload()  # as the server has it: the conversation's model is the one chosen
    expect(alice.get_by_label("Model", exact=True)).to_have_value(re.compile(":emulator/chat$"))
