"""`POST /audio/transcriptions`, OpenAI's speech-to-text endpoint, in every emulated dialect.

None of the four gateways' documents describes it; it is OpenAI's (a `multipart/form-data` body
with `file` and `model`, a JSON answer `{"text": ..., "usage": ...}`), which the servers people
run in front of providers serve (LiteLLM, vLLM). The emulator serves it in each dialect's own
envelope, so that voice input works offline: the usage reports the audio's seconds and the
cost in the dialect's unit (Numes' `usage.cost` in USD, Osmexo's `x_llm_cost_micro`, Nodul's
`usage.cost` in PnP; tiny-3b reports no cost, as its chat answers report none), with its IDs in
its headers, and a generation record like any other request.

The transcript is deterministic, not speech recognition: it names the audio's length (a WAV's
duration from its header; for anything else its bytes at Opus' 32 kbit/s, what Chromium's
MediaRecorder writes) and the first hex digits of its SHA-256, so that a test can tell that the
very audio it sent was transcribed, once. The model name picks a scenario as for chat:
`emulator/error-before` answers with the dialect's error before anything.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from ..transcription import wav_seconds
from .channel import Channel
from .dialects import Dialect
from .options import Options
from .parsing import BadRequest, scenario_of
from .records import EmulatorRecord, Registry

__all__ = ["TranscriptionRequest", "parse_transcription", "run_transcription", "transcript"]

# What a second of transcribed audio costs, in USD (OpenAI's whisper-1: $0.006 a minute).
PRICE_PER_SECOND = 0.0001
# A compressed recording's bytes per second when its length cannot be read from a header.
OPUS_BYTES_PER_SECOND = 4000
# Nodul's PnP per USD (its chat prices are a third above Numes' per token: near enough).
_PNP_PER_USD = 1.5


@dataclass(frozen=True, slots=True)
class TranscriptionRequest:
    model: str
    scenario: str
    model_query: str
    audio: bytes
    filename: str
    media_type: str
    language: str


def parse_transcription(body: bytes, content_type: str) -> TranscriptionRequest:
    """The `multipart/form-data` body of a transcription request; `BadRequest` without a `file`
    or a `model`."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise BadRequest("The body must be multipart/form-data with `file` and `model`.")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    fields: dict[str, Message] = {}
    for part in message.iter_parts() if message.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            fields[name] = part
    upload = fields.get("file")
    audio = upload.get_payload(decode=True) if upload is not None else None
    if upload is None or not isinstance(audio, bytes) or not audio:
        raise BadRequest("`file` is required: the audio to transcribe.")
    model, scenario, query = scenario_of(_text(fields.get("model")))
    return TranscriptionRequest(
        model=model,
        scenario=scenario,
        model_query=query,
        audio=audio,
        filename=upload.get_filename() or "audio",
        media_type=upload.get_content_type(),
        language=_text(fields.get("language")),
    )


def _text(part: Message | None) -> str:
    if part is None:
        return ""
    payload = part.get_payload(decode=True)
    return payload.decode("utf-8", "replace").strip() if isinstance(payload, bytes) else ""


def seconds_of(audio: bytes) -> float:
    """The audio's length: a WAV's from its header, anything else's from its size."""
    found = wav_seconds(audio)
    return len(audio) / OPUS_BYTES_PER_SECOND if found is None else found


def transcript(audio: bytes) -> str:
    """What the emulator hears in `audio`: its length and a short hash, nothing else."""
    digest = hashlib.sha256(audio).hexdigest()[:8]
    return (
        f"Emulated transcript of {seconds_of(audio):.1f} seconds of audio "
        f"({len(audio):,} bytes, sha256 {digest})."
    )


def _usage(dialect: Dialect, seconds: float) -> tuple[dict[str, Any], float | int]:
    """The usage object in `dialect`'s own terms, and its cost for the record."""
    billed = max(1, math.ceil(seconds))
    usage: dict[str, Any] = {"type": "duration", "seconds": billed}
    usd = billed * PRICE_PER_SECOND
    match dialect.name:
        case "osmexo":
            micro = round(usd * 1_000_000)
            return {**usage, "x_llm_cost_micro": micro, "x_llm_usage_estimated": False}, micro
        case "tiny":
            return usage, 0
        case "nodul":
            pnp = round(usd * _PNP_PER_USD, 9)
            return {**usage, "cost": pnp}, pnp
        case _:
            return {**usage, "cost": round(usd, 9)}, round(usd, 9)


async def run_transcription(
    channel: Channel,
    dialect: Dialect,
    registry: Registry,
    options: Options,
    request: TranscriptionRequest,
) -> None:
    ids = dialect.new_ids(text_completion=False)
    record = registry.add(
        EmulatorRecord(
            id=ids.generation_id,
            request_id=ids.request_id,
            dialect=dialect.name,
            endpoint="audio/transcriptions",
            model=request.model,
            scenario=request.scenario,
            streamed=False,
            bytes_delivered=len(request.audio),
        )
    )
    if await channel.pause(options.ttft_ms / 1000):
        return registry.finish(record, "cancelled")
    if request.scenario == "error-before":
        reply = dialect.error_reply("before", ids)
        await channel.json(reply.status, reply.body, reply.headers)
        return registry.finish(record, "error", finish_reason="error", error_code=reply.status)
    text = transcript(request.audio)
    usage, cost = _usage(dialect, seconds_of(request.audio))
    record.tokens_completion = len(text.split())
    record.total_cost = cost
    await channel.json(
        200, {"text": text, "usage": usage}, dialect.json_headers(ids, request.model, cost)
    )
    registry.finish(record, "completed", finish_reason="stop")
