"""What a screen reader is told: one polite status line (#answer-status) says in a few words that
an answer started, finished or was stopped; no answer is a live region (one would read the whole
answer at its end, and every finished answer would stay one) and none wraps the conversation;
every message is an article named by who wrote it; an error is announced once.

A mutation observer in the page stands in for the screen reader: it counts the changes it would
announce (a live region's content changing while the region is not busy, a region ceasing to be
busy, which is when ARIA has what changed while it was busy read, an alert arriving) on
`<html data-announced data-alerts>`. It starts once the page has loaded, as content present at
load is not announced.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import send

pytestmark = [pytest.mark.browser]

WORDS = " ".join(f"w{n:03d}" for n in range(1, 161))  # echoed back in ~4 s at 40 tokens/s
LONG_WORDS = " ".join(f"w{n:03d}" for n in range(1, 321))  # ~8 s: a reload lands mid-stream

# Anything a screen reader treats as live that contains a message: it would read every delta.
LIVE_ABOVE_ANSWERS = (
    ':is([aria-live], [role="log"], [role="status"], [role="alert"], [role="marquee"],'
    ' [role="timer"]):has(article)'
)
LIVE_IN_AN_ANSWER = "article [aria-live], article[aria-live]"
STATUS = "#answer-status"

ANNOUNCEMENT_WATCH = """
document.addEventListener("DOMContentLoaded", () => {
  const root = document.documentElement;
  const counts = { announced: 0, alerts: 0 };
  const show = () => {
    root.dataset.announced = String(counts.announced);
    root.dataset.alerts = String(counts.alerts);
  };
  const element = (node) => (node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement);
  new MutationObserver((records) => {
    const regions = new Set();
    const alerts = new Set();
    for (const record of records) {
      const target = element(record.target);
      if (record.type === "attributes") {
        // A region no longer busy: what changed while it was is read now.
        if (record.oldValue === "true" && target.matches("[aria-live]")) regions.add(target);
        continue;
      }
      const region = target && target.closest("[aria-live]");
      if (region) regions.add(region);
      const alert = target && target.closest('[role="alert"]');
      if (alert) alerts.add(alert);
      for (const node of record.addedNodes) {
        if (node.nodeType !== Node.ELEMENT_NODE) continue;
        if (node.matches('[role="alert"]')) alerts.add(node);
        for (const inner of node.querySelectorAll('[role="alert"]')) alerts.add(inner);
      }
    }
    for (const region of regions) {
      if (region.getAttribute("aria-busy") !== "true") counts.announced++;
    }
    for (const alert of alerts) if (alert.isConnected && alert.textContent.trim()) counts.alerts++;
    show();
  }).observe(document, {
    subtree: true,
    childList: true,
    characterData: true,
    attributeFilter: ["aria-busy"],
    attributeOldValue: true,
  });
  show();
});
"""


def watch_announcements(page: Any) -> Any:
    """Reload `page` with the observer in place; the `<html>` locator that shows its counts."""
    page.add_init_script(ANNOUNCEMENT_WATCH)
    page.reload()
    html = page.locator("html")
    expect(html).to_have_attribute("data-announced", "0")
    return html


def mark(locator: Any) -> None:
    """Tag the element (not its attributes, which a render may rewrite) to tell if it is kept."""
    locator.evaluate("el => { el.keptAcrossRender = true }")


def new_conversation(page: Any) -> None:
    """Start a conversation and wait for its first answer, so the next send is an htmx insert."""
    send(page, "warm up", "emulator/echo")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(page.locator("article.assistant").last).to_have_attribute("data-status", "completed")


@pytest.mark.paced
def test_an_answer_is_announced_in_a_few_words_when_it_starts_and_when_it_ends(
    alice: Any,
) -> None:
    new_conversation(alice)
    html = watch_announcements(alice)
    status = alice.locator(STATUS)
    expect(status).to_have_attribute("role", "status")
    answer = send(alice, WORDS, "emulator/echo")
    region = answer.locator(".content")
    expect(answer).to_have_attribute("data-status", "streaming")
    expect(status).to_have_text("Writing an answer…")
    expect(region).to_contain_text("w020")  # deltas are arriving, unannounced
    expect(region).not_to_have_attribute("aria-live", re.compile(".*"))
    expect(alice.locator(LIVE_ABOVE_ANSWERS)).to_have_count(0)
    expect(alice.locator(LIVE_IN_AN_ANSWER)).to_have_count(0)
    expect(html).to_have_attribute("data-announced", "1")

    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    expect(region).to_contain_text("w160")
    expect(status).to_have_text("Answer finished.")
    expect(html).to_have_attribute("data-announced", "2")
    expect(alice.locator(LIVE_IN_AN_ANSWER)).to_have_count(0)
    expect(alice.locator(LIVE_ABOVE_ANSWERS)).to_have_count(0)


@pytest.mark.paced
def test_a_stopped_answer_is_announced_as_stopped(alice: Any) -> None:
    new_conversation(alice)
    html = watch_announcements(alice)
    answer = send(alice, LONG_WORDS, "emulator/echo")
    expect(answer.locator(".content")).to_contain_text("w020")
    alice.get_by_label("Message").press("Escape")
    expect(answer).to_have_attribute("data-status", "cancelled")
    expect(alice.locator(STATUS)).to_have_text("Answer stopped.")
    expect(html).to_have_attribute("data-announced", "2")


@pytest.mark.paced
def test_an_answer_reattached_after_a_reload_is_announced_when_it_ends(alice: Any) -> None:
    send(alice, LONG_WORDS, "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(alice.locator("article.assistant .content")).to_contain_text("w040")
    html = watch_announcements(alice)
    answer = alice.locator("article.assistant").last
    region = answer.locator(".content")
    expect(answer).to_have_attribute("data-status", "streaming")
    expect(region).to_contain_text("w080")  # the snapshot and new deltas, unannounced
    expect(alice.locator(LIVE_IN_AN_ANSWER)).to_have_count(0)

    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    expect(alice.locator(STATUS)).to_have_text("Answer finished.")
    expect(html).to_have_attribute("data-announced", "1")  # its end; its start was no news


def test_a_finished_conversation_loads_quietly_with_named_messages(alice: Any) -> None:
    new_conversation(alice)
    send(alice, "second question", "emulator/echo")
    expect(alice.locator("article.assistant").last).to_have_attribute(
        "data-status", "completed", timeout=15_000
    )
    html = watch_announcements(alice)
    expect(alice.locator("body")).to_have_attribute("data-socket", "open")
    expect(alice.get_by_role("article", name="You", exact=True)).to_have_count(2)
    expect(alice.get_by_role("article", name="Assistant", exact=True)).to_have_count(2)
    expect(alice.get_by_role("article", name="You", exact=True).last).to_have_text(
        "second question"
    )
    expect(alice.locator("[aria-busy]")).to_have_count(0)
    expect(alice.locator(LIVE_IN_AN_ANSWER)).to_have_count(0)
    expect(alice.locator(LIVE_ABOVE_ANSWERS)).to_have_count(0)
    expect(alice.locator(STATUS)).to_be_empty()
    expect(html).to_have_attribute("data-announced", "0")
    expect(html).to_have_attribute("data-alerts", "0")


def test_an_error_is_announced_once_outside_the_answer_region(alice: Any) -> None:
    sockets: list[Any] = []

    def relay(ws: Any) -> None:
        sockets.append(ws)
        ws.connect_to_server()

    new_conversation(alice)
    alice.route_web_socket(re.compile(r"/ws/"), relay)
    html = watch_announcements(alice)
    answer = send(alice, "hello there friend", "emulator/error-midstream")
    expect(answer).to_have_attribute("data-status", "failed", timeout=15_000)
    alert = answer.get_by_role("alert")
    expect(alert).to_have_count(1)
    expect(alert).to_contain_text("The answer failed")
    expect(answer.locator(".content").get_by_role("alert")).to_have_count(0)
    expect(html).to_have_attribute("data-alerts", "1")
    expect(html).to_have_attribute("data-announced", "1")  # its start; the alert says the end

    # Another render of the same answer (as when its cost is reconciled) repeats nothing.
    mark(alert)
    footer = answer.locator("footer")
    mark(footer)
    generation = answer.get_attribute("data-generation")
    assert generation is not None
    sockets[-1].send(json.dumps({"t": "updated", "g": int(generation)}))
    expect(footer).not_to_have_js_property("keptAcrossRender", True)  # the render is in
    expect(alert).to_have_js_property("keptAcrossRender", True)
    expect(html).to_have_attribute("data-alerts", "1")
    expect(html).to_have_attribute("data-announced", "1")
