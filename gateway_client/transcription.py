"""`transcribe`: audio to text through OpenAI's `POST /audio/transcriptions`.

Not a stream: one `multipart/form-data` request (`file`, `model`, optionally `language`) and one
JSON answer, `{"text": ..., "usage": ...}`. The usage is read as a chat stream's usage chunk is
(`chunks.parse_usage`: `usage.cost`, or `usage.x_llm_cost_micro`), so a transcription's cost
comes in its gateway's unit like any other request's; OpenAI's own shapes (`{"type":
"duration", "seconds"}` or token counts) are kept in `Usage.raw`. The audio is sent once: a
refused request is not sent again, since a person waits and the gateway may have billed it.
"""

from __future__ import annotations

import asyncio
import io
import wave
from dataclasses import dataclass
from typing import Protocol

import httpx
import orjson

from .chunks import parse_usage
from .dialects import Timeouts, header_request_id
from .errors import ConnectError, GatewayTimeout, ProtocolError, StatusError
from .events import Usage

__all__ = ["MAX_TRANSCRIPT_BYTES", "Transcription", "transcribe", "wav_seconds"]

# A transcript is text: a minute of speech is about a kilobyte. Anything past this is not one.
MAX_TRANSCRIPT_BYTES = 1024 * 1024


class _Client(Protocol):
    """What of `GatewayClient` a transcription uses (named here: the client imports this)."""

    timeouts: Timeouts
    dialect: str | None

    async def read_status_error(self, response: httpx.Response) -> StatusError: ...


@dataclass(frozen=True, slots=True)
class Transcription:
    """What the gateway heard, with what it reported about the request."""

    text: str
    usage: Usage | None
    generation_id: str
    request_id: str


async def transcribe(
    client: _Client,
    http: httpx.AsyncClient,
    url: str,
    *,
    model: str,
    audio: bytes,
    filename: str,
    media_type: str,
    language: str | None = None,
) -> Transcription:
    """What `client`'s gateway hears in `audio` (`GatewayClient.transcribe`, which passes its
    `http` client and the endpoint's `url`). `StatusError` for an error answer (404: the
    gateway has no such endpoint), `ProtocolError` for a 200 that is not a transcript,
    `TransportError` when it cannot be reached or does not answer within the client's
    first-token deadline (a caller with a shorter one wraps the call in `asyncio.timeout`)."""
    data = {"model": model, "response_format": "json"}
    if language:
        data["language"] = language
    seconds = client.timeouts.first_token
    request = http.build_request(
        "POST",
        url,
        data=data,
        files={"file": (filename, audio, media_type)},
        headers={"Accept": "application/json"},
    )
    try:
        async with asyncio.timeout(seconds):
            response = await http.send(request, stream=True)
            if response.status_code != 200:
                raise await client.read_status_error(response)
            try:
                body = bytearray()
                async for piece in response.aiter_bytes():
                    body += piece
                    if len(body) > MAX_TRANSCRIPT_BYTES:
                        raise ProtocolError("the transcript is larger than 1 MiB")
            finally:
                await response.aclose()
    except TimeoutError:
        raise GatewayTimeout(
            f"no transcript within {seconds or 0:g} s", phase="first_token"
        ) from None
    except httpx.TransportError as exc:
        raise ConnectError(
            f"could not reach {request.url.host}: {str(exc) or type(exc).__name__}"
        ) from exc
    headers = response.headers
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        payload = None
    text = payload.get("text") if isinstance(payload, dict) else None
    if not isinstance(text, str):
        raise ProtocolError(
            "the gateway's answer is not a transcript (no `text`)",
            request_id=header_request_id(headers, client.dialect),
        )
    usage = payload.get("usage")
    return Transcription(
        text=text,
        usage=parse_usage(usage) if isinstance(usage, dict) else None,
        generation_id=headers.get("x-generation-id") or "",
        request_id=header_request_id(headers, client.dialect) or "",
    )


def wav_seconds(audio: bytes) -> float | None:
    """A WAV recording's length from its header; None for anything else (a compressed
    recording's length is in its frames, which only a decoder reads)."""
    if audio[:4] != b"RIFF" or audio[8:12] != b"WAVE":
        return None
    try:
        with wave.open(io.BytesIO(audio)) as reader:
            return float(reader.getnframes() / reader.getframerate())
    except (wave.Error, EOFError, ZeroDivisionError):
        return None
