"""Read aloud in real Chromium against real Daphne and the paced emulator: the audio plays while
the gateway is still sending it, Stop closes the gateway's request, a read aloud that breaks off
says so, the read aloud's cost is in the admin's cost ledger, Pause holds the audio where it is
while the gateway goes on sending, and a stored read aloud played again shows its total and
seeks.

Set `CHAT_SCREENSHOTS` to a directory to keep screenshots of an answer being read aloud
(1280x800 and 390x844).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import expect

from gateway_client.emulator import EmulatorRecord
from tests.waiting import poll

from .conftest import screenshots, send

pytestmark = [pytest.mark.browser, pytest.mark.paced]

# A chunk of audio every 1.3 s (8 in all), so the read aloud is still arriving while it plays
# (and within the server's idle timeout of 2 s, LLM_IDLE_TIMEOUT).
SLOW_SPEECH = "emulator/audio?tokens_per_second=3"
# 200 beeps, 30 s of audio (480 kB): Chromium starts a WAV once it holds ~200 kB of it (a 96 kB
# one only once it is whole), so a shorter answer would not show the audio playing early.
LONG_WORDS = " ".join(f"otter{n}" for n in range(200))
WORDS = " ".join(f"otter{n}" for n in range(40))
PLAYING = """() => {
  const audio = document.getElementById("read-aloud-player");
  return audio && !audio.paused && audio.currentTime > 0;
}"""
# What the player says, and what the page shows of it, at one moment.
PLAYER = """() => {
  const audio = document.getElementById("read-aloud-player");
  return {
    time: audio.currentTime, duration: String(audio.duration), paused: audio.paused,
    shown: document.querySelector(".read-aloud-position").textContent,
  };
}"""


def set_speech_model(page: Any, server_url: str, model: str) -> None:
    """Give the default gateway `model` for Read aloud through its admin page, as an admin
    does (saving a gateway drops the server's cached gateway settings at once)."""
    page.goto(f"{server_url}/admin/chatapp/gateway/")
    page.get_by_role("link", name="Default gateway").click()
    page.get_by_label("Speech model").fill(model)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")


@pytest.fixture
def speech(alice: Any, server_url: str) -> Iterator[Callable[[str], None]]:
    def use(model: str) -> None:
        set_speech_model(alice, server_url, model)
        alice.goto(f"{server_url}/")

    yield use
    set_speech_model(alice, server_url, "")


def speech_records(paced_emulator: Any, since: set[str]) -> list[EmulatorRecord]:
    return [
        record
        for record in paced_emulator.app.records.all()
        if record.endpoint == "audio/speech" and record.id not in since
    ]


def read_aloud_status(page: Any, state_url: str | None, *, settled: bool = False) -> str | None:
    """The answer's newest read aloud's status, as the page's state URL tells it (None while it
    is still `streaming`, with `settled`)."""
    state = page.evaluate("url => fetch(url).then(r => r.json())", state_url)
    status: str = state["status"]
    return None if settled and status == "streaming" else status


def _read_aloud_in_view(page: Any) -> None:
    page.locator("button.read-aloud").last.scroll_into_view_if_needed()


def test_read_aloud_plays_as_it_arrives_and_stop_cancels_it_upstream(
    alice: Any, server_url: str, paced_emulator: Any, speech: Callable[[str], None]
) -> None:
    speech(SLOW_SPEECH)
    answer = send(alice, LONG_WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    before = {record.id for record in paced_emulator.app.records.all()}
    read = answer.get_by_role("button", name="Read aloud")
    read.click()

    alice.wait_for_function(PLAYING, timeout=20_000)
    (record,) = speech_records(paced_emulator, before)
    assert record.finished_at is None, "playing while the gateway is still sending"
    assert record.bytes_delivered > 0
    stop = answer.get_by_role("button", name="Stop reading")
    expect(stop).to_have_attribute("data-reading", "playing")
    screenshots(alice, "read-aloud-playing", _read_aloud_in_view)

    stop.click()
    expect(answer.get_by_role("button", name="Read aloud")).to_be_visible()
    expect(answer.locator(".read-aloud-note")).to_have_text("Stopped.")
    assert alice.evaluate("() => document.getElementById('read-aloud-player').paused")
    poll(lambda: record.cancelled_at, what="the gateway to see the request closed")
    finished = paced_emulator.app.records.wait_finished(record.id, 5)
    assert finished.final_outcome == "cancelled"
    assert finished.bytes_delivered < record.bytes_delivered * 8, "cut short, not played out"
    assert len(speech_records(paced_emulator, before)) == 1, "one request for the reading"

    # The read aloud's cost, settled from the gateway's record, is in the cost ledger.
    answer_pk = answer.get_attribute("data-message")
    ledger = f"{server_url}/admin/chatapp/generation/?kind__exact=speech"

    def cost_shown() -> bool:
        alice.goto(ledger)
        row = alice.locator("#result_list tbody tr").filter(
            has_text=f"Read aloud of answer #{answer_pk}"
        )
        return row.count() == 1 and "generation record" in row.inner_text()

    poll(cost_shown, what="the reading's cost in the ledger")
    row = alice.locator("#result_list tbody tr").first
    expect(row.locator(".field-status")).to_have_text("Cancelled")
    amount = format(Decimal(str(finished.total_cost)).normalize(), "f")
    expect(row.locator(".field-cost_shown")).to_contain_text(amount)


def test_a_read_aloud_that_breaks_off_says_so(
    alice: Any, paced_emulator: Any, speech: Callable[[str], None]
) -> None:
    speech("emulator/error-midstream")
    answer = send(alice, WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "completed")
    answer.get_by_role("button", name="Read aloud").click()
    note = answer.locator(".read-aloud-note")
    expect(note).to_contain_text("The audio broke off after", timeout=20_000)
    expect(answer.get_by_role("button", name="Read aloud")).to_be_visible()


def test_pause_holds_the_place_while_the_audio_goes_on_arriving_and_resume_goes_on_from_it(
    alice: Any, paced_emulator: Any, speech: Callable[[str], None]
) -> None:
    speech(SLOW_SPEECH)
    answer = send(alice, LONG_WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    before = {record.id for record in paced_emulator.app.records.all()}
    answer.get_by_role("button", name="Read aloud").click()
    alice.wait_for_function(PLAYING, timeout=20_000)
    (record,) = speech_records(paced_emulator, before)
    assert record.finished_at is None, "paused below while the gateway is still sending"

    # The position advances as it plays; the streamed WAV's total is unknown (Infinity) in
    # Chromium, so the elapsed time stands alone.
    position = answer.locator(".read-aloud-position")
    expect(position).to_have_text(re.compile(r"^0:0[0-2]$"))
    expect(position).to_have_text(re.compile(r"^0:0[3-9]$"), timeout=10_000)
    shown = alice.evaluate(PLAYER)
    assert shown["duration"] == "Infinity"
    assert "/" not in shown["shown"]
    seek = answer.get_by_role("slider", name="Position in the reading")
    expect(seek).to_be_enabled()
    screenshots(alice, "read-aloud-position", _read_aloud_in_view)

    answer.get_by_role("button", name="Pause").click()
    expect(answer.get_by_role("button", name="Resume")).to_be_visible()
    expect(answer.locator(".read-aloud-note")).to_have_text("Paused.")
    alice.wait_for_function("() => document.getElementById('read-aloud-player').paused")
    held = alice.evaluate(PLAYER)["time"]
    # While it is paused the gateway sends the rest: the request is not closed by a pause.
    finished = paced_emulator.app.records.wait_finished(record.id, 30)
    assert finished.final_outcome == "completed"
    assert finished.cancelled_at is None
    state_url = answer.locator("button.read-aloud").get_attribute("data-state-url")
    status = poll(
        lambda: read_aloud_status(alice, state_url, settled=True), what="the read aloud recorded"
    )
    assert status == "completed", "the read aloud was whole though paused throughout"
    paused = alice.evaluate(PLAYER)
    assert paused["paused"]
    assert paused["time"] == held, "the place did not move while paused"
    expect(answer.get_by_role("button", name="Stop reading")).to_have_attribute(
        "data-reading", "paused"
    )
    screenshots(alice, "read-aloud-paused", _read_aloud_in_view)

    alice.evaluate("""() => {
      const audio = document.getElementById("read-aloud-player");
      audio.addEventListener("playing", () => { window.resumedAt = audio.currentTime; },
                             { once: true });
    }""")
    answer.get_by_role("button", name="Resume").click()
    alice.wait_for_function("() => window.resumedAt !== undefined")
    resumed_at = alice.evaluate("() => window.resumedAt")
    assert abs(resumed_at - held) < 0.25, (resumed_at, held)
    alice.wait_for_function(
        f"() => document.getElementById('read-aloud-player').currentTime > {held} + 1"
    )
    expect(answer.get_by_role("button", name="Pause")).to_be_visible()

    answer.get_by_role("button", name="Stop reading").click()
    expect(answer.locator(".read-aloud-note")).to_have_text("Stopped.")
    expect(answer.locator(".read-aloud-controls")).to_have_count(0)
    assert len(speech_records(paced_emulator, before)) == 1, "one request, paused or not"


def test_a_stored_read_aloud_played_again_shows_its_total_and_seeks(
    alice: Any, paced_emulator: Any, speech: Callable[[str], None]
) -> None:
    speech("emulator/audio")
    answer = send(alice, LONG_WORDS, "emulator/echo")
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    before = {record.id for record in paced_emulator.app.records.all()}
    read = answer.locator("button.read-aloud")
    read.click()
    alice.wait_for_function(PLAYING, timeout=20_000)
    (record,) = speech_records(paced_emulator, before)
    assert paced_emulator.app.records.wait_finished(record.id, 15).final_outcome == "completed"
    state_url = read.get_attribute("data-state-url")
    status = poll(
        lambda: read_aloud_status(alice, state_url, settled=True), what="the read aloud recorded"
    )
    assert status == "completed"
    answer.get_by_role("button", name="Stop reading").click()
    expect(read).to_have_text("Read aloud")

    read.click()  # from the stored audio, with its byte ranges
    alice.wait_for_function(PLAYING, timeout=20_000)
    position = answer.locator(".read-aloud-position")
    expect(position).to_have_text(re.compile(r"^0:0\d / 0:30$"))
    answer.get_by_role("button", name="Pause").click()
    alice.wait_for_function("() => document.getElementById('read-aloud-player').paused")
    seek = answer.get_by_role("slider", name="Position in the reading")
    expect(seek).to_have_attribute("max", "30")
    start = alice.evaluate(PLAYER)["time"]
    assert start < 5

    # The keyboard moves the place a second a key, past what would have played by now.
    seek.focus()
    for _ in range(20):
        seek.press("ArrowRight")
    alice.wait_for_function("() => document.getElementById('read-aloud-player').currentTime >= 20")
    expect(position).to_have_text(re.compile(r"^0:2\d / 0:30$"))
    assert alice.evaluate(PLAYER)["paused"], "seeking keeps it paused"
    expect(seek).to_have_attribute("aria-valuetext", re.compile(r"^0:2\d of 0:30$"))
    screenshots(alice, "read-aloud-stored-seek", _read_aloud_in_view)

    seek.press("Home")
    alice.wait_for_function("() => document.getElementById('read-aloud-player').currentTime < 1")
    expect(position).to_have_text("0:00 / 0:30")
    assert len(speech_records(paced_emulator, before)) == 1, "played again for free"


# Whether `el` is whole in the messages' visible part (which is inside the window) and the
# topmost thing at its centre and near its bottom edge: nothing covers or clips it.
IN_VIEW_ON_TOP = """(el) => {
  const box = el.getBoundingClientRect();
  const seen = document.getElementById("messages").getBoundingClientRect();
  const on = (y) => {
    const hit = document.elementFromPoint(box.left + box.width / 2, y);
    return hit === el || el.contains(hit);
  };
  return box.top >= seen.top && box.bottom <= seen.bottom && seen.bottom <= innerHeight
    && box.left >= 0 && box.right <= innerWidth
    && on(box.top + box.height / 2) && on(box.bottom - 2);
}"""


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_pause_and_the_slider_come_into_view_above_the_composer(
    alice: Any, speech: Callable[[str], None], size: str
) -> None:
    width, height = {"desktop": (1280, 800), "phone": (390, 844)}[size]
    alice.set_viewport_size({"width": width, "height": height})
    speech("emulator/audio")
    answer = send(alice, LONG_WORDS, "emulator/echo")  # taller than the messages' box
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    read = answer.get_by_role("button", name="Read aloud")
    alice.wait_for_function(IN_VIEW_ON_TOP, arg=read.element_handle())  # the end is in view
    read.click()
    pause = answer.get_by_role("button", name="Pause")
    seek = answer.get_by_role("slider", name="Position in the reading")
    for control in (pause, seek):
        alice.wait_for_function(IN_VIEW_ON_TOP, arg=control.element_handle())
    screenshots(alice, f"read-aloud-controls-{size}")
    answer.get_by_role("button", name="Stop reading").click()
    expect(answer.locator(".read-aloud-controls")).to_have_count(0)
