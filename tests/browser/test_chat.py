"""Chat in real headless Chromium against a real Daphne server and the emulator."""

from __future__ import annotations

import itertools
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import expect

from chatapp.gateways.units import CostUnit, Money
from tests.waiting import poll

from .conftest import (
    SLOW_START_S,
    choose_model,
    content,
    finished,
    send,
    sign_in,
    wait_for_more_text,
    wait_for_text,
)

pytestmark = [pytest.mark.browser]

WORDS = " ".join(f"w{n:03d}" for n in range(1, 161))  # echoed back in ~4 s at 40 tokens/s
# Long enough (~8 s) that a reload and a dropped socket land mid-stream even on a loaded machine.
LONG_WORDS = " ".join(f"w{n:03d}" for n in range(1, 321))


RECORD_VIEWS = """el => {
    // Every state of the answer's text the page shows while it streams, from now on.
    const box = el.querySelector(".content");
    const views = (window.streamViews = [box.textContent]);
    new MutationObserver(() => {
        if (el.dataset.status === "streaming") views.push(box.textContent);
    }).observe(box, { childList: true, characterData: true, subtree: true });
}"""


def record_views(answer: Any) -> None:
    """Record, in the page, every change of the streaming answer's text."""
    answer.evaluate(RECORD_VIEWS)


def wait_for_views(page: Any, count: int) -> int:
    """Wait until `count` views of the streaming text are recorded (it kept changing while it
    streamed: the final render is not counted); how many there are."""
    page.wait_for_function("n => window.streamViews.length >= n", arg=count)
    return int(page.evaluate("window.streamViews.length"))


def assert_prefix_growing(page: Any, full: str) -> list[str]:
    """Every recorded view of the streaming text is a prefix of `full`, none shorter than the
    one before: no gap and no duplicate."""
    seen = [view.strip() for view in page.evaluate("window.streamViews")]
    for text in seen:
        assert full.startswith(text), f"not a prefix of the answer: {text[-80:]!r}"
    for before, after in itertools.pairwise(seen):
        assert len(after) >= len(before), f"the text shrank: {before[-40:]!r} -> {after[-40:]!r}"
    return seen


@pytest.mark.paced
def test_send_streams_token_by_token_and_shows_the_record(alice: Any, server_url: str) -> None:
    answer = send(alice, "Explain server-sent events", "emulator/chat")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "streaming")
    expect(answer.get_by_role("button", name="Stop")).to_be_visible()
    first = wait_for_text(answer)
    wait_for_more_text(answer, len(first))  # the text grows while streaming
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(alice.get_by_role("button", name="Stop")).to_have_count(0)
    meta = answer.locator(".meta").inner_text()
    assert "emulator/chat" in meta
    assert "tokens" in meta
    cost = re.search(r"\$0\.\d+", meta)
    assert cost, f"the answer's cost in dollars (Numes USD credits): {meta!r}"
    assert "first token" in meta
    # The conversation's running total follows the answer's cost, without a reload.
    # (rounded for reading there: `Money.rounded`; the answer's own figure is exact).
    rounded = Money(Decimal(cost[0][1:]), CostUnit.USD).rounded()
    expect(alice.locator("#conversation-spend")).to_contain_text(f"This conversation: {rounded}")
    # The month's total is the page's (other tests' answers of this user count too).
    alice.reload()
    expect(alice.locator("#month-spend")).to_contain_text(
        re.compile(r"Your spend this month: \$\d")
    )
    expect(
        answer.locator(".content.rendered h2, .content.rendered h1, .content.rendered p").first
    ).to_be_visible()
    expect(alice.locator("#conversation-list")).to_contain_text("Explain server-sent events")
    assert "sk-browser-secret" not in alice.content(), "the API key never reaches the browser"


def test_enter_sends_and_shift_enter_is_a_newline(alice: Any) -> None:
    box = alice.get_by_label("Message")
    choose_model(alice, "emulator/echo")
    box.click()
    box.type("line one")
    box.press("Shift+Enter")
    box.type("line two")
    expect(alice.locator("article.message")).to_have_count(0)
    box.press("Enter")
    expect(alice.locator("article.user")).to_have_text("line one\nline two")
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)


@pytest.mark.paced
def test_stop_before_the_first_token(alice: Any, paced_emulator: Any) -> None:
    answer = send(alice, "hello", "emulator/slow-start")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    stop = answer.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    records = paced_emulator.app.records
    record = poll(
        lambda: records.latest(scenario="slow-start", finished_at=None),
        what="the emulator to take the request",
    )
    # The click's own moment, in the page (same wall clock as the emulator's record).
    alice.evaluate(
        "document.addEventListener('click', () => { window.stopClickedAt = Date.now() / 1000 },"
        " {capture: true, once: true})"
    )
    stop.click()
    expect(answer).to_have_attribute("data-status", "cancelled", timeout=5_000)
    clicked = alice.evaluate("window.stopClickedAt")
    record = records.wait_finished(record.id)
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    # Closed by the click (after it), not by waiting out the slow start (before its end).
    assert clicked <= record.cancelled_at < record.created_at + SLOW_START_S
    assert content(answer).strip() == ""
    expect(answer).to_contain_text("Stopped.")


@pytest.mark.paced
def test_stop_after_the_first_token_keeps_the_partial_answer(alice: Any) -> None:
    answer = send(alice, "otters", "emulator/long")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    partial = wait_for_text(answer, minimum=20)
    answer.get_by_role("button", name="Stop").click()
    expect(answer).to_have_attribute("data-status", "cancelled", timeout=5_000)
    final = content(answer)
    assert final.strip()
    assert len(final) < 20_000
    first_word = re.findall(r"[A-Za-z]{3,}", partial)[0]
    assert first_word in final
    expect(answer.get_by_role("button", name="Retry")).to_be_visible()


WINDOW_ADDITIONS = """() => {
    // The names the page's own scripts added to `window`: those a blank frame's lacks.
    const frame = document.createElement("iframe");
    document.body.append(frame);
    const blank = new Set(Object.getOwnPropertyNames(frame.contentWindow));
    frame.remove();
    return Object.getOwnPropertyNames(window).filter((name) => !blank.has(name)).sort();
}"""


def test_the_page_scripts_put_nothing_on_window(alice: Any) -> None:
    """Every page script is a module: only htmx (a classic script) is a global, and the
    browser's own `stop` is still the browser's (read_aloud.js's used to replace it)."""
    answer = send(alice, "hello there", "emulator/echo")
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    assert alice.evaluate(WINDOW_ADDITIONS) == ["htmx"]
    assert alice.evaluate("() => String(window.stop).includes('[native code]')")


@pytest.mark.paced
def test_reload_mid_stream_reattaches_without_gap_or_duplicate(alice: Any) -> None:
    sockets: list[tuple[Any, Any]] = []  # each socket the page opens: its page and server sides

    def relay(ws: Any) -> None:
        sockets.append((ws, ws.connect_to_server()))

    send(alice, LONG_WORDS, "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    wait_for_text(answer, minimum=40)
    alice.route_web_socket(re.compile(r"/ws/chat/"), relay)
    alice.reload()
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "streaming")
    # The page carries the text written so far; the socket's snapshot tops it up at once.
    expect(answer.locator(".content")).not_to_be_empty(timeout=1_000)
    record_views(answer)
    before_drop = wait_for_views(alice, 4)
    # A dropped websocket reconnects and continues the same way.
    page_side, server_side = sockets[-1]
    page_side.close()  # the page did not ask for it, as when the network drops
    server_side.close()
    wait_for_views(alice, before_drop + 4)
    assert len(sockets) == 2, "the text went on over a second socket"
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    assert_prefix_growing(alice, LONG_WORDS)
    assert content(answer).strip() == LONG_WORDS


@pytest.mark.paced
def test_two_tabs_on_one_conversation_both_stream(alice: Any) -> None:
    # Long: the second tab loads, then both must see the text grow before it ends (a ~4 s
    # answer ended first on a loaded machine).
    send(alice, LONG_WORDS, "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    other = alice.context.new_page()
    other.goto(alice.url)
    answers = [page.locator("article.assistant").last for page in (alice, other)]
    expect(answers[1]).to_have_attribute("data-status", "streaming")
    growth = [wait_for_text(answer, minimum=1) for answer in answers]
    for answer, before in zip(answers, growth, strict=True):
        wait_for_more_text(answer, len(before))
    for answer in answers:
        expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
        assert content(answer).strip() == LONG_WORDS
    other.close()


@pytest.mark.paced
def test_closing_every_tab_does_not_stop_the_generation(
    browser: Any, server_url: str, alice: Any, paced_emulator: Any
) -> None:
    records = paced_emulator.app.records
    earlier = {record.id for record in records.all()}
    send(alice, WORDS, "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    url = alice.url
    wait_for_text(alice.locator("article.assistant").last)
    (record,) = [r for r in records.all() if r.id not in earlier and r.scenario == "echo"]
    alice.close()
    # With no tab open, the gateway keeps streaming to the server.
    delivered = record.tokens_completion
    poll(
        lambda: record.tokens_completion > delivered + 10, what="tokens delivered with no tab open"
    )
    again = sign_in(browser, server_url, "alice")
    again.goto(url)
    answer = again.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    assert content(answer).strip() == WORDS
    record = records.wait_finished(record.id)
    assert record.final_outcome == "completed"
    assert record.cancelled_at is None
    again.context.close()


@pytest.mark.paced  # a fast stream's last tokens can go with the connection a drop resets
@pytest.mark.parametrize(
    ("model", "status", "words"),
    [
        ("emulator/error-before", "failed", "The gateway refused the request (HTTP 402"),
        ("emulator/error-midstream", "failed", "The answer failed"),
        ("emulator/drop", "incomplete", "The answer was cut off"),
        ("emulator/stall", "failed", "The answer stalled"),
    ],
)
def test_errors_are_shown_where_the_answer_would_be(
    alice: Any, model: str, status: str, words: str
) -> None:
    send(alice, "hello there friend", model)
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", status, timeout=15_000)
    error = answer.get_by_role("alert")
    expect(error).to_contain_text(words)
    if status != "failed" or "midstream" in model or "stall" in model:
        # Awaited: the final render may replace the live text just after the status is set.
        expect(answer.locator(".content")).not_to_have_text(re.compile(r"^\s*$"))
        expect(error).to_contain_text("The partial answer is kept.")
    # A new version in its place, with the model in the picker (the same one here).
    answer.get_by_role("button", name="Retry").click()
    expect(answer.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    expect(alice.locator("article.assistant")).to_have_count(1)
    expect(answer).to_have_attribute("data-status", status, timeout=15_000)


def test_another_users_conversation_is_refused(alice: Any, bob: Any, server_url: str) -> None:
    send(alice, "alice's secret", "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    url = alice.url
    response = bob.goto(url)
    assert response is not None
    assert response.status == 404
    bob.goto(f"{server_url}/")
    expect(bob.locator("#conversation-list")).not_to_contain_text("alice's secret")
    path = re.search(r"/c/(\d+)/", url)
    assert path is not None
    # Bob's own socket may not watch Alice's conversation: it is told it is gone, and nothing else.
    outcome = bob.evaluate(
        """(id) => new Promise((resolve) => {
            const ws = new WebSocket(`ws://${location.host}/ws/chat/`);
            ws.onopen = () => ws.send(JSON.stringify({t: "watch", c: Number(id)}));
            ws.onmessage = (event) => resolve(event.data);
            ws.onclose = () => resolve("closed");
        })""",
        path.group(1),
    )
    assert json.loads(outcome) == {"t": "gone", "c": int(path.group(1))}


def test_rename_and_delete_a_conversation(alice: Any) -> None:
    send(alice, "name me", "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(alice.locator("article.assistant").last).to_have_attribute(
        "data-status", "completed", timeout=15_000
    )
    alice.get_by_text("More", exact=True).click()
    alice.get_by_label("Title").fill("Renamed chat")
    alice.get_by_role("button", name="Rename").click()
    expect(alice.locator("#conversation-title")).to_have_text("Renamed chat")
    expect(alice.locator("#conversation-list")).to_contain_text("Renamed chat")
    alice.once("dialog", lambda dialog: dialog.accept())
    alice.get_by_role("button", name="Delete conversation").click()
    expect(alice.locator("#conversation-title")).to_have_text("New chat")
    expect(alice.locator("#conversation-list")).not_to_contain_text("Renamed chat")


@pytest.mark.paced
def test_sidebar_navigation_switches_the_live_conversation(alice: Any, server_url: str) -> None:
    send(alice, "first topic", "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    first_url = alice.url
    expect(alice.locator("article.assistant").last).to_have_attribute(
        "data-status", "completed", timeout=15_000
    )
    alice.get_by_role("link", name="New chat", exact=True).click()
    send(alice, "second topic", "emulator/echo")
    expect(alice).not_to_have_url(first_url)
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    # htmx-boosted navigation back to the first conversation: its socket takes over.
    alice.locator("#conversation-list").get_by_role("link", name="first topic").click()
    expect(alice).to_have_url(first_url)
    expect(alice.locator("#conversation-title")).to_have_text("first topic")
    answer = send(alice, WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "streaming")
    record_views(answer)
    wait_for_views(alice, 4)  # it streams in view over the new page's socket
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    assert_prefix_growing(alice, WORDS)
    assert content(answer).strip() == WORDS
    expect(alice.locator("article.user")).to_have_count(2)


@pytest.mark.paced
def test_a_lost_delta_is_recovered_with_a_snapshot(alice: Any) -> None:
    """The channel layer is at-most-once: drop deltas on the wire and watch the page recover."""
    requests: list[str] = []
    snapshots: list[str] = []

    def relay(ws: Any) -> None:
        server = ws.connect_to_server()
        count = {"delta": 0}

        def from_server(message: str | bytes) -> None:
            text = message if isinstance(message, str) else message.decode()
            if text.startswith("["):  # a delta (chatapp/messaging/socket_messages.py)
                count["delta"] += 1
                if count["delta"] % 4 == 2:
                    return  # lost
            if '"t":"snapshot"' in text:
                snapshots.append(text)
            ws.send(text)

        def from_page(message: str | bytes) -> None:
            text = message if isinstance(message, str) else message.decode()
            requests.append(text)
            server.send(text)

        server.on_message(from_server)
        ws.on_message(from_page)

    finished(alice, "warm up")  # ended: a send while it streams would be refused as busy
    alice.route_web_socket(re.compile(r"/ws/chat/"), relay)
    alice.reload()
    answer = send(alice, WORDS, "emulator/echo")
    record_views(answer)
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    seen = assert_prefix_growing(alice, WORDS)
    assert any('"t":"snapshot"' in r for r in requests), "the page asked for a snapshot"
    assert snapshots
    assert len(seen[-1]) > len(WORDS) // 2, "text kept flowing after the gaps"
    assert content(answer).strip() == WORDS
