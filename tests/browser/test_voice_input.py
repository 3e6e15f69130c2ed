"""Voice input in real Chromium against real Daphne and the paced emulator: Chromium's fake
microphone plays a tone this module writes (a WAV), the composer records it with its time and
level shown, and the server's real endpoint sends the recording once to the emulator, whose
transcript lands in the message box (or is sent at once); a refused microphone and a gateway
that refuses each say so in words by the button, which is absent while no gateway transcribes.

Set `CHAT_SCREENSHOTS` to a directory to keep screenshots of a recording and of a refusal
(1280x800 and 390x844).
"""

from __future__ import annotations

import io
import math
import re
import struct
import wave
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from gateway_client.emulator import EmulatorRecord

from .conftest import CHROMIUM, CHROMIUM_ARGS, screenshots, sign_in

pytestmark = [pytest.mark.browser]

FAKE_MICROPHONE = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
TRANSCRIPT = re.compile(r"^Emulated transcript of \d+\.\d seconds of audio \(([\d,]+) bytes")


def speech_like(seconds: float, rate: int = 48000) -> bytes:
    """A tone that warbles and comes in bursts, as speech does, as a mono 16-bit WAV: Chromium's
    noise suppression takes a steady tone for noise and fades it out within a second."""
    frames = bytearray()
    for i in range(round(seconds * rate)):
        t = i / rate
        pitch = 300 + 200 * math.sin(2 * math.pi * 1.5 * t)
        sounding = (t * 4) % 1 < 0.6
        frames += struct.pack("<h", round(12000 * math.sin(2 * math.pi * pitch * t) * sounding))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(bytes(frames))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def tone_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("voice") / "speech.wav"
    path.write_bytes(speech_like(3.0))
    return path


@pytest.fixture(scope="module")
def browser(tone_file: Path) -> Iterator[Any]:
    """Chromium whose microphone is the tone, allowed without asking (the conftest's `browser`,
    with a fake microphone)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (make chromium)")
    args = [*CHROMIUM_ARGS, *FAKE_MICROPHONE, f"--use-file-for-fake-audio-capture={tone_file}"]
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        yield chromium
        chromium.close()


def set_transcription_model(page: Any, server_url: str, model: str) -> None:
    """Give the default gateway `model` for voice input through its admin page, as an admin
    does (saving a gateway drops the server's cached gateway settings at once)."""
    page.goto(f"{server_url}/admin/chatapp/gateway/")
    page.get_by_role("link", name="Default gateway").click()
    page.get_by_label("Transcription model").fill(model)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")


@pytest.fixture
def transcribing(alice: Any, server_url: str) -> Iterator[Callable[[str], None]]:
    def use(model: str) -> None:
        set_transcription_model(alice, server_url, model)
        alice.goto(f"{server_url}/")

    yield use
    set_transcription_model(alice, server_url, "")


def transcriptions(paced_emulator: Any, since: set[str]) -> list[EmulatorRecord]:
    return [
        record
        for record in paced_emulator.app.records.all()
        if record.endpoint == "audio/transcriptions" and record.id not in since
    ]


def ledger(page: Any, server_url: str) -> Any:
    """The admin's list of transcriptions, newest first."""
    page.goto(f"{server_url}/admin/chatapp/generation/?kind=transcription")
    return page.locator("#result_list tbody tr")


def test_a_recording_is_written_into_the_box_once_with_its_time_and_level_shown(
    alice: Any, server_url: str, paced_emulator: Any, transcribing: Callable[[str], None]
) -> None:
    expect(alice.locator("#composer .voice-button")).to_have_count(0)  # no gateway transcribes
    transcribing("emulator/audio")
    before = {record.id for record in transcriptions(paced_emulator, set())}
    speak = alice.get_by_role("button", name="Speak")
    speak.click()
    expect(alice.get_by_role("button", name="Stop recording")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(alice.locator(".voice-elapsed")).to_have_text("0:01")  # the time runs
    alice.wait_for_function(  # the tone moves the level meter
        "() => Number(document.querySelector('.voice-meter').getAttribute('aria-valuenow')) > 20"
    )
    screenshots(alice, "voice-input-recording")
    alice.get_by_role("button", name="Stop recording").click()
    box = alice.get_by_label("Message")
    expect(box).to_have_value(TRANSCRIPT)
    expect(box).to_be_focused()
    (sent,) = transcriptions(paced_emulator, before)
    match = TRANSCRIPT.match(box.input_value())
    assert match is not None
    assert int(match.group(1).replace(",", "")) == sent.bytes_delivered > 1000
    expect(alice.locator("article.user")).to_have_count(0)  # to edit, not sent
    expect(alice.locator(".voice-panel")).to_be_hidden()

    page = alice.context.new_page()
    rows = ledger(page, server_url)
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Voice input")
    expect(rows.first).to_contain_text("Completed")
    expect(rows.first.locator(".field-cost_shown")).to_contain_text("$")
    page.close()


def test_send_at_once_sends_what_was_heard(
    alice: Any, paced_emulator: Any, transcribing: Callable[[str], None]
) -> None:
    transcribing("emulator/audio")
    alice.get_by_role("button", name="Speak").click()
    alice.get_by_label("Send at once").check()  # offered while it records
    expect(alice.locator(".voice-elapsed")).to_have_text("0:01")
    alice.get_by_role("button", name="Stop recording").click()
    expect(alice.locator("article.user .content")).to_have_text(TRANSCRIPT)
    expect(alice.get_by_label("Message")).to_have_value("")
    alice.reload()
    alice.get_by_role("button", name="Speak").click()
    expect(alice.get_by_label("Send at once")).to_be_checked()  # kept in this browser
    alice.get_by_label("Send at once").uncheck()
    alice.get_by_role("button", name="Stop recording").click()
    expect(alice.get_by_label("Message")).to_have_value(TRANSCRIPT)


def test_a_gateway_that_refuses_says_why_by_the_button(
    alice: Any, paced_emulator: Any, transcribing: Callable[[str], None]
) -> None:
    transcribing("emulator/error-before")
    alice.get_by_role("button", name="Speak").click()
    expect(alice.locator(".voice-elapsed")).to_have_text("0:01")
    alice.get_by_role("button", name="Stop recording").click()
    note = alice.locator("#composer .voice-note")
    expect(note).to_have_text(
        "The gateway could not transcribe the recording: Insufficient credits"
    )
    expect(note).to_have_class(re.compile(r"\berror\b"))
    expect(alice.get_by_label("Message")).to_have_value("")
    screenshots(alice, "voice-input-refused")


def test_a_refused_microphone_says_so(
    browser: Any, server_url: str, tone_file: Path, transcribing: Callable[[str], None]
) -> None:
    transcribing("emulator/audio")
    # The same microphone without the fake permission prompt: headless Chromium dismisses the
    # real one, which the page hears as a refusal.
    fake_device = [
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={tone_file}",
    ]
    asking = browser.browser_type.launch(
        executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *fake_device]
    )
    try:
        page = sign_in(asking, server_url, "alice")
        page.get_by_role("button", name="Speak").click()
        expect(page.locator("#composer .voice-note")).to_have_text(
            re.compile(r"^The microphone is blocked for this site: allow it in the browser")
        )
        expect(page.get_by_role("button", name="Speak")).to_have_attribute("aria-pressed", "false")
        screenshots(page, "voice-input-blocked")
    finally:
        asking.close()


def test_no_microphone_says_so(
    browser: Any, server_url: str, transcribing: Callable[[str], None]
) -> None:
    transcribing("emulator/audio")
    # Allowed without asking, but no fake device: this machine has no microphone of its own.
    bare = browser.browser_type.launch(
        executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, "--use-fake-ui-for-media-stream"]
    )
    try:
        page = sign_in(bare, server_url, "alice")
        page.get_by_role("button", name="Speak").click()
        expect(page.locator("#composer .voice-note")).to_have_text(
            "No microphone was found: connect one, then press Speak again."
        )
    finally:
        bare.close()


def test_the_recording_stops_itself_at_the_limit(
    alice: Any, server_url: str, transcribing: Callable[[str], None]
) -> None:
    transcribing("emulator/audio")
    alice.evaluate("() => { document.querySelector('.voice-button').dataset.maxSeconds = '1'; }")
    alice.get_by_role("button", name="Speak").click()
    note = alice.locator("#composer .voice-note")
    expect(alice.get_by_label("Message")).to_have_value(TRANSCRIPT)
    expect(note).to_have_text("Stopped at the 0:01 limit.")
