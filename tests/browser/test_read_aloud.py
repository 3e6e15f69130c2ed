"""Read aloud in real Chromium against real Daphne and the paced emulator: the audio plays while
the gateway is still sending it, Stop closes the gateway's request, a read aloud that breaks off
says so, and the read aloud's cost is in the admin's cost ledger.

Set `CHAT_SCREENSHOTS` to a directory to keep screenshots of an answer being read aloud
(1280x800 and 390x844).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import expect

from gateway_client.emulator import GenerationRecord
from tests.waiting import poll

from .conftest import screenshots, send

pytestmark = [pytest.mark.browser]

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


def speech_records(paced_emulator: Any, since: set[str]) -> list[GenerationRecord]:
    return [
        record
        for record in paced_emulator.app.records.all()
        if record.endpoint == "audio/speech" and record.id not in since
    ]


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
