"""Numes' image stream (`image_generation.*` events, or JSON) and speech (a real WAV, streamed in
several body chunks, ending early on failure with the outcome in the generation record)."""

from __future__ import annotations

import asyncio
import base64
import io
import wave

import httpx
import pytest

from gateway_client.emulator import Registry
from tests.gateway_client.test_emulator import AUTH, http, png_size, stream


def registry(url: str) -> Registry:
    records: Registry = url.app.records  # type: ignore[attr-defined]
    return records


async def test_image_stream(emulator_url: str) -> None:
    body = {"model": "emulator/chat", "prompt": "a tram in Lisbon", "stream": True, "n": 2}
    result = await stream(emulator_url, "numes", body, path="images")
    headers = result.response.headers
    assert headers["content-type"] == "text/event-stream"
    assert headers["x-generation-id"]
    assert result.done
    kinds = [(c["type"], c.get("index")) for c in result.chunks]
    assert kinds == [
        ("image_generation.partial", 0),
        ("image_generation.completed", 0),
        ("image_generation.partial", 1),
        ("image_generation.completed", 1),
        ("image_generation.usage", None),
    ]
    for chunk in result.chunks[:-1]:
        assert chunk["media_type"] == "image/png"
        assert png_size(base64.b64decode(chunk["b64_json"])) == (32, 32)
    usage = result.chunks[-1]["usage"]
    assert usage["output_images"] == 2
    assert usage["cost"] > 0
    record = registry(emulator_url).wait_finished(headers["x-generation-id"])
    assert record.final_outcome == "completed"
    assert record.endpoint == "images"


async def test_image_json(emulator_url: str) -> None:
    body = {"model": "emulator/chat", "prompt": "a tram in Lisbon"}
    async with http(headers=AUTH) as client:
        response = await client.post(f"{emulator_url}/numes/api/v1/images", json=body)
    assert response.status_code == 200
    data = response.json()
    (image,) = data["data"]
    assert png_size(base64.b64decode(image["b64_json"])) == (32, 32)
    assert data["usage"]["output_images"] == 1


async def test_image_errors(emulator_url: str) -> None:
    body = {"model": "emulator/error-midstream", "prompt": "a tram", "stream": True}
    result = await stream(emulator_url, "numes", body, path="images")
    assert [c["type"] for c in result.chunks] == [
        "image_generation.partial",
        "image_generation.error",
    ]
    error = result.chunks[-1]["error"]
    assert error == {"code": "provider_unavailable", "message": error["message"], "status": 503}
    assert result.done

    before = await stream(
        emulator_url, "numes", {**body, "model": "emulator/error-before"}, path="images"
    )
    assert before.response.status_code == 402
    assert before.response.json()["error"]["metadata"]["error_type"] == "insufficient_credits"

    missing = await stream(emulator_url, "numes", {"model": "emulator/chat"}, path="images")
    assert missing.response.status_code == 400


async def test_speech_is_a_streamed_wav(emulator_url: str) -> None:
    body = {"model": "emulator/chat", "input": "Hello from the tram to the castle", "voice": "a"}
    chunks: list[bytes] = []
    async with http(headers=AUTH) as client:
        url = f"{emulator_url}/numes/api/v1/audio/speech"
        params = {"tokens_per_second": 200}
        async with client.stream("POST", url, json=body, params=params) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "audio/wav"
            generation_id = response.headers["x-generation-id"]
            chunks.extend([raw async for raw in response.aiter_raw()])
        short = await client.post(url, json={**body, "input": "Hi"})
    assert len(chunks) >= 4, "several body chunks"
    audio = b"".join(chunks)
    with wave.open(io.BytesIO(audio)) as wav:
        assert wav.getnchannels() == 1
        assert wav.getsampwidth() == 2
        frames = wav.getnframes()
        assert frames / wav.getframerate() > 0.5
        assert len(wav.readframes(frames)) == frames * 2
    with wave.open(io.BytesIO(short.content)) as wav:
        assert wav.getnframes() < frames, "length follows the text"
    record = registry(emulator_url).wait_finished(generation_id)
    assert record.final_outcome == "completed"
    assert record.bytes_delivered == len(audio)


async def test_speech_failure_ends_the_body_early(emulator_url: str) -> None:
    body = {"model": "emulator/error-midstream", "input": "Hello from the tram to the castle"}
    parts: list[bytes] = []

    async def collect(response: httpx.Response) -> None:
        async for raw in response.aiter_raw():
            parts.append(raw)

    async with http(headers=AUTH) as client:
        url = f"{emulator_url}/numes/api/v1/audio/speech"
        async with client.stream("POST", url, json=body) as response:
            generation_id = response.headers["x-generation-id"]
            with pytest.raises(httpx.RemoteProtocolError):
                await collect(response)
        received = b"".join(parts)
        assert received.startswith(b"RIFF")
        record = registry(emulator_url).wait_finished(generation_id)
        assert record.final_outcome == "error"
        assert 0 < record.bytes_delivered == len(received)
        lookup = f"{emulator_url}/numes/api/v1/generation"
        outcomes = []
        for _ in range(50):
            data = (await client.get(lookup, params={"id": generation_id})).json()["data"]
            outcomes.append(data["outcome"])
            if data["outcome"] != "in_progress":
                break
            await asyncio.sleep(0.02)
    assert outcomes[-1] == "error"
