"""`GatewayClient.transcribe` against the emulator's `/audio/transcriptions` over loopback HTTP:
every dialect's cost unit, the deterministic transcript, its record, and the errors."""

from __future__ import annotations

import hashlib
import io
import math
import struct
import wave

import httpx
import pytest

from gateway_client import GatewayClient, ProtocolError, StatusError, Timeouts
from gateway_client.emulator import TRANSCRIPTION_MODEL, EmulatorURL
from gateway_client.emulator.transcription import parse_transcription, seconds_of, transcript

QUICK = Timeouts(connect=5, first_token=10, idle=1.0, total=30)
PATHS = {
    "numes": "/numes/api/v1",
    "osmexo": "/osmexo/v1",
    "tiny": "/tiny/v1",
    "nodul": "/nodul/api/v1",
}
# (the unit `parse_usage` reads, the amount for 2 s at $0.0001 a second) per dialect
COSTS = {
    "numes": ("credits", 0.0002),
    "osmexo": ("micro_usd", 200),
    "tiny": None,
    "nodul": ("credits", 0.0003),
}


def tone(seconds: float, rate: int = 16000) -> bytes:
    """A 440 Hz tone as a mono 16-bit WAV."""
    frames = b"".join(
        struct.pack("<h", round(8000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(round(seconds * rate))
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(frames)
    return buffer.getvalue()


@pytest.mark.parametrize("dialect", list(PATHS))
async def test_each_dialect_transcribes_with_its_cost_unit(
    emulator_url: EmulatorURL, dialect: str
) -> None:
    audio = tone(2.0)
    before = {record.id for record in emulator_url.app.records.all()}
    async with GatewayClient(emulator_url + PATHS[dialect], "k", timeouts=QUICK) as client:
        heard = await client.transcribe(
            model=TRANSCRIPTION_MODEL, audio=audio, filename="voice.wav", media_type="audio/wav"
        )
    digest = hashlib.sha256(audio).hexdigest()[:8]
    assert heard.text == (
        f"Emulated transcript of 2.0 seconds of audio ({len(audio):,} bytes, sha256 {digest})."
    )
    assert heard.usage is not None
    assert heard.usage.raw["seconds"] == 2
    expected = COSTS[dialect]
    if expected is None:
        assert heard.usage.cost is None  # tiny-3b reports no cost, as for its chat answers
    else:
        assert heard.usage.cost is not None
        assert (heard.usage.cost.unit, heard.usage.cost.amount) == pytest.approx(expected)
    (record,) = [
        record
        for record in emulator_url.app.records.all()
        if record.endpoint == "audio/transcriptions" and record.id not in before
    ]
    assert record.bytes_delivered == len(audio)
    # The IDs each dialect's JSON answers carry in their headers (tiny-3b's: none; Nodul's: its
    # generation ID alone).
    assert heard.request_id == (record.request_id if dialect in ("numes", "osmexo") else "")
    assert heard.generation_id == (record.id if dialect in ("numes", "nodul") else "")


async def test_the_gateways_error_before_is_a_status_error(emulator_url: EmulatorURL) -> None:
    async with GatewayClient(emulator_url + PATHS["numes"], "k", timeouts=QUICK) as client:
        with pytest.raises(StatusError) as caught:
            await client.transcribe(
                model="emulator/error-before",
                audio=tone(0.5),
                filename="voice.wav",
                media_type="audio/wav",
            )
    assert caught.value.status == 402


async def test_a_gateway_without_the_endpoint_answers_404(emulator_url: EmulatorURL) -> None:
    async with GatewayClient(emulator_url + "/numes/api/v9", "k", timeouts=QUICK) as client:
        with pytest.raises(StatusError) as caught:
            await client.transcribe(
                model="m", audio=b"abc", filename="a.webm", media_type="audio/webm"
            )
    assert caught.value.status == 404


async def test_a_200_that_is_no_transcript_is_a_protocol_error() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
        return httpx.Response(200, json={"words": "no text field"})

    transport = httpx.MockTransport(answer)
    async with GatewayClient("http://gw.test/v1", "k", transport=transport) as client:
        with pytest.raises(ProtocolError, match="not a transcript"):
            await client.transcribe(model="m", audio=b"x", filename="a.webm", media_type="a/b")


async def test_the_request_is_the_openai_multipart_shape() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"text": "hello", "usage": {"cost": 0.5}})

    transport = httpx.MockTransport(answer)
    async with GatewayClient("http://gw.test/v1", "k", transport=transport) as client:
        heard = await client.transcribe(
            model="whisper-1", audio=b"OggS...", filename="voice.webm", media_type="audio/webm"
        )
    assert heard.text == "hello"
    assert heard.usage is not None
    assert heard.usage.cost is not None
    assert heard.usage.cost.amount == 0.5
    (request,) = seen
    assert str(request.url) == "http://gw.test/v1/audio/transcriptions"
    parsed = parse_transcription(request.read(), request.headers["content-type"])
    assert (parsed.model, parsed.audio, parsed.filename) == ("whisper-1", b"OggS...", "voice.webm")
    assert parsed.media_type == "audio/webm"


def test_a_recordings_length_from_its_header_or_its_size() -> None:
    assert seconds_of(tone(1.5)) == pytest.approx(1.5)
    assert seconds_of(b"\x1aE\xdf\xa3" + bytes(7996)) == 2.0  # WebM: Opus' 4,000 bytes a second
    assert transcript(b"abc") != transcript(b"abd")
