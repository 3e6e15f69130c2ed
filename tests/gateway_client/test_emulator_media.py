"""Numes' image stream (`image_generation.*` events, or JSON), speech (a real WAV, streamed in
several body chunks, ending early on failure with the outcome in the generation record), and chat
media: audio output in `delta.audio` pieces and hosted-tool files in `delta.artifacts`."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import wave
from typing import Any

import httpx
import pytest

from gateway_client.emulator import Registry
from tests.gateway_client.test_emulator import (
    AUTH,
    BASES,
    DIALECTS,
    chat_body,
    http,
    png_size,
    stream,
)


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
    record = await asyncio.to_thread(
        registry(emulator_url).wait_finished, headers["x-generation-id"]
    )
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
    record = await asyncio.to_thread(registry(emulator_url).wait_finished, generation_id)
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
        record = await asyncio.to_thread(registry(emulator_url).wait_finished, generation_id)
        assert record.final_outcome == "error"
        assert 0 < record.bytes_delivered == len(received)
        await asyncio.to_thread(registry(emulator_url).wait_settled, generation_id)
        lookup = f"{emulator_url}/numes/api/v1/generation"
        data = (await client.get(lookup, params={"id": generation_id})).json()["data"]
    assert data["outcome"] == "error"


def deltas(chunks: list[dict[str, Any]], key: str) -> list[Any]:
    return [c["choices"][0]["delta"][key] for c in chunks if key in c["choices"][0]["delta"]]


async def test_chat_audio_arrives_in_pieces_of_one_real_wav(emulator_url: str) -> None:
    result = await stream(emulator_url, "numes", chat_body("audio"))
    assert result.done
    pieces = deltas([c for c in result.chunks if c["choices"]], "audio")
    assert len(pieces) > 5
    assert {p["format"] for p in pieces} == {"wav"}
    # Each piece is base64 on its own; joined, they are one playable clip.
    clip = b"".join(base64.b64decode(p["data"], validate=True) for p in pieces)
    with wave.open(io.BytesIO(clip)) as wav:
        frames = wav.getnframes()
        assert frames / wav.getframerate() > 0.5
        assert len(wav.readframes(frames)) == frames * 2
    transcript = "".join(p["transcript"] for p in pieces)
    assert transcript.startswith("Here is a short spoken answer about Lisbon")
    assert result.content == ""
    assert result.finish_reasons == ["stop"]
    assert result.chunks[-1]["usage"]["completion_tokens"] == len(pieces)


async def test_chat_files_are_artifacts_with_base64_data(emulator_url: str) -> None:
    result = await stream(emulator_url, "numes", chat_body("files"))
    (artifacts,) = deltas([c for c in result.chunks if c["choices"]], "artifacts")
    table, picture = artifacts
    assert {k: table[k] for k in ("type", "filename", "media_type")} == {
        "type": "file",
        "filename": "lisbon.csv",
        "media_type": "text/csv",
    }
    rows = list(csv.reader(io.StringIO(base64.b64decode(table["data"]).decode())))
    assert rows[0] == ["word", "letters", "reversed"]
    assert rows[1] == ["Lisbon", "6", "nobsiL"]
    assert picture["type"] == "image"
    assert picture["filename"] == "lisbon.png"
    assert picture["media_type"] == "image/png"
    assert png_size(base64.b64decode(picture["data"])) == (32, 32)
    assert "Lisbon" in result.content
    assert result.done


@pytest.mark.parametrize("dialect", [d for d in DIALECTS if d != "numes"])
@pytest.mark.parametrize("scenario", ["audio", "files"])
async def test_other_gateways_answer_media_scenarios_with_text(
    emulator_url: str, dialect: str, scenario: str
) -> None:
    result = await stream(emulator_url, dialect, chat_body(scenario))
    assert result.content.startswith("## About")
    for chunk in result.chunks:
        for choice in chunk["choices"]:
            assert not {"audio", "artifacts"} & set(choice.get("delta", {}))


async def test_non_stream_chat_media(emulator_url: str) -> None:
    async with http(headers=AUTH) as client:
        url = f"{emulator_url}{BASES['numes']}/chat/completions"
        spoken = (await client.post(url, json=chat_body("audio", stream=False))).json()
        filed = (await client.post(url, json=chat_body("files", stream=False))).json()
    message = spoken["choices"][0]["message"]
    assert message["content"] is None
    assert message["audio"]["format"] == "wav"
    assert message["audio"]["transcript"].startswith("Here is a short spoken answer")
    assert base64.b64decode(message["audio"]["data"])[:4] == b"RIFF"
    artifacts = filed["choices"][0]["message"]["artifacts"]
    assert [a["filename"] for a in artifacts] == ["lisbon.csv", "lisbon.png"]
