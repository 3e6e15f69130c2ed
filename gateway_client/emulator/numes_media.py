"""Numes' non-chat streams: `POST /images` (SSE `image_generation.*` events) and
`POST /audio/speech` (raw WAV bytes in several body chunks, no in-band errors).

Both honour the scenario model names that make sense for them: `error-before` answers with the
402 envelope, `error-midstream` fails after output started (an `image_generation.error` frame, or
a speech body that ends early), `drop` and `stall` behave as for chat. Each request gets a
generation record like a chat completion, so `GET /generation` can confirm the outcome.
"""

from __future__ import annotations

import time
from typing import Any

from .channel import Channel
from .dialects import Ids, Numes
from .media import png_b64, wav_bytes
from .options import Options
from .parsing import MediaRequest
from .records import EmulatorRecord, Registry
from .streaming import DONE, frame

__all__ = ["run_images", "run_speech"]

IMAGE_PRICE = 0.04
SPEECH_PRICE_PER_CHAR = 1.5e-5
_SPEECH_CHUNKS = 8


_NUMES = Numes()


def _record(
    registry: Registry, channel: Channel, request: MediaRequest, endpoint: str
) -> tuple[EmulatorRecord, Ids]:
    ids = _NUMES.new_ids(text_completion=False)
    record = registry.add(
        EmulatorRecord(
            id=ids.generation_id,
            request_id=ids.request_id,
            dialect="numes",
            endpoint=endpoint,
            model=request.model,
            scenario=request.scenario,
            streamed=request.stream or endpoint == "audio/speech",
            tokens_prompt=len(request.text),
        )
    )

    def on_disconnect(when: float) -> None:
        if record.settles_at is None:
            record.cancelled_at = when

    channel.on_disconnect = on_disconnect
    return record, ids


def _id_headers(ids: Ids) -> list[tuple[str, str]]:
    return [("x-request-id", ids.request_id), ("x-generation-id", ids.generation_id)]


async def _error_reply(
    channel: Channel, registry: Registry, record: EmulatorRecord, ids: Ids, kind: str
) -> None:
    reply = _NUMES.error_reply(kind, ids)
    await channel.json(reply.status, reply.body, [*reply.headers, _id_headers(ids)[1]])
    registry.finish(record, "error", finish_reason="error", error_code=reply.status)


def _image_usage(count: int) -> dict[str, Any]:
    return {
        "input_images": 0,
        "output_images": count,
        "input_audio_seconds": 0,
        "output_audio_seconds": 0,
        "input_characters": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cost": round(IMAGE_PRICE * count, 6),
    }


async def run_images(
    channel: Channel, registry: Registry, options: Options, request: MediaRequest
) -> None:
    record, ids = _record(registry, channel, request, "images")
    id_headers = _id_headers(ids)
    scenario = request.scenario
    interval = max(options.token_interval_s * 8, 0.001)

    if await channel.pause(options.ttft_ms / 1000):
        return registry.finish(record, "cancelled")
    if scenario == "error-before":
        return await _error_reply(channel, registry, record, ids, "before")

    images = [png_b64(f"{request.text}#{i}") for i in range(request.count)]
    if not request.stream:
        if scenario == "error-midstream":
            return await _error_reply(channel, registry, record, ids, "midstream")
        if await channel.pause(interval * request.count):
            return registry.finish(record, "cancelled")
        record.total_cost = round(IMAGE_PRICE * request.count, 6)
        body = {
            "created": int(time.time()),
            "data": [{"b64_json": b64, "media_type": "image/png"} for b64 in images],
            "usage": _image_usage(request.count),
        }
        await channel.json(200, body, id_headers)
        return registry.finish(record, "completed", finish_reason="stop")

    headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), *id_headers]
    await channel.start(200, headers)
    for index, b64 in enumerate(images):
        partial = png_b64(f"{request.text}#{index}", blocky=True)
        event = {"type": "image_generation.partial", "index": index, "b64_json": partial}
        await channel.write(frame({**event, "media_type": "image/png"}))
        if await channel.pause(interval):
            return registry.finish(record, "cancelled")
        if scenario in ("error-midstream", "stall", "drop"):
            break
        event = {"type": "image_generation.completed", "index": index, "b64_json": b64}
        await channel.write(frame({**event, "media_type": "image/png"}))
        record.total_cost = round(IMAGE_PRICE * (index + 1), 6)
        if await channel.pause(interval):
            return registry.finish(record, "cancelled")
    if scenario == "drop":
        channel.abort()
        return registry.finish(record, "error", error_code="connection_dropped")
    if scenario in ("error-midstream", "stall"):
        if scenario == "stall" and await channel.pause(min(600.0, options.stall_limit_s or 600.0)):
            return registry.finish(record, "cancelled")
        kind = "midstream" if scenario == "error-midstream" else "stall"
        status, error_type, message = _NUMES.errors[kind]
        error = {"code": error_type, "message": message, "status": status}
        await channel.write(frame({"type": "image_generation.error", "error": error}))
        await channel.end(DONE)
        return registry.finish(record, "error", finish_reason="error", error_code=status)
    usage = _image_usage(len(images))
    await channel.write(frame({"type": "image_generation.usage", "usage": usage}))
    await channel.end(DONE)
    registry.finish(record, "completed", finish_reason="stop")


async def run_speech(
    channel: Channel, registry: Registry, options: Options, request: MediaRequest
) -> None:
    record, ids = _record(registry, channel, request, "audio/speech")
    if await channel.pause(options.ttft_ms / 1000):
        return registry.finish(record, "cancelled")
    if request.scenario == "error-before":
        return await _error_reply(channel, registry, record, ids, "before")

    audio = wav_bytes(request.text)
    size = -(-len(audio) // _SPEECH_CHUNKS)
    parts = [audio[i : i + size] for i in range(0, len(audio), size)]
    failing = request.scenario in ("error-midstream", "drop")
    if failing:
        parts = parts[: len(parts) // 2]
    price = SPEECH_PRICE_PER_CHAR * len(request.text)
    interval = options.token_interval_s * 4
    await channel.start(200, [("content-type", "audio/wav"), *_id_headers(ids)])
    start = time.monotonic()
    for i, part in enumerate(parts):
        if await channel.pause_until(start + i * interval):
            return registry.finish(record, "cancelled")
        await channel.write(part)
        record.bytes_delivered += len(part)
        record.total_cost = round(price * record.bytes_delivered / len(audio), 9)
    if failing:
        # No in-band error on a raw audio body: it just ends early.
        channel.abort()
        return registry.finish(record, "error", finish_reason="error", error_code=503)
    await channel.end()
    registry.finish(record, "completed", finish_reason="stop")
