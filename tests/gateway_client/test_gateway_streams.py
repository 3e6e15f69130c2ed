"""Streams captured from OpenRouter, vLLM and llama.cpp's `llama-server`, served to our client over
loopback HTTP whole and in 7-byte and 1-byte pieces, reach the fields their expected.json names
(read off each stream, not copied from our client), and OpenRouter's `: OPENROUTER PROCESSING`
comments are never taken for progress by the first-token and idle deadlines.

Where each capture comes from and what it shows: tests/fixtures/gateways/streams/SOURCES.md.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gateway_client import GatewayClient, GatewayTimeout, Timeouts
from gateway_client.accumulator import Completion

from .expectations import mismatches, replayed
from .rawserver import Peer, raw_server

STREAMS = Path(__file__).parent.parent / "fixtures" / "gateways" / "streams"
EXPECTED: dict[str, dict[str, Any]] = json.loads((STREAMS / "expected.json").read_text())
FILES = sorted(path.name for path in STREAMS.glob("*.sse"))
KEEPALIVE = b": OPENROUTER PROCESSING"
FAST = Timeouts(connect=2, first_token=5, idle=5, total=30)


def gateway(name: str) -> str:
    return name.split("-", 1)[0]


def serve(body: bytes, chunk_size: int | None):
    async def script(peer: Peer) -> None:
        await peer.head()
        step = chunk_size or len(body)
        for start in range(0, len(body), step):
            await peer.chunk(body[start : start + step])
        await peer.end()

    return raw_server(script)


async def stream_all(url: str, dialect: str, timeouts: Timeouts) -> Completion:
    async with GatewayClient(url, "k", dialect=dialect, timeouts=timeouts) as client:
        stream = client.stream_chat(model="m", messages=[{"role": "user", "content": "hi"}])
        async with stream:
            async for _ in stream:
                pass
        return stream.completion


def test_every_capture_has_an_expectation_and_a_source() -> None:
    sources = (STREAMS / "SOURCES.md").read_text()
    assert {gateway(name) for name in FILES} == {"llamacpp", "openrouter", "vllm"}
    assert sorted(EXPECTED) == FILES
    assert [name for name in FILES if f"`{name}`" not in sources] == []


@pytest.mark.parametrize("name", FILES)
def test_the_keepalive_count_is_the_captures(name: str) -> None:
    lines = (STREAMS / name).read_bytes().split(b"\n")
    assert lines.count(KEEPALIVE) == EXPECTED[name]["keepalive_comments"]


@pytest.mark.parametrize("chunk_size", [None, 7, 1])
@pytest.mark.parametrize("name", FILES)
async def test_capture_replays_to_its_expectation(name: str, chunk_size: int | None) -> None:
    expected = EXPECTED[name]
    async with serve((STREAMS / name).read_bytes(), chunk_size) as (url, _):
        completion = await stream_all(url, gateway(name), FAST)
    actual = json.loads(json.dumps(completion.to_dict()))
    assert mismatches(expected["expected"], actual) == []
    tokens = expected["tokens"]
    assert (
        completion.prompt_tokens,
        completion.completion_tokens,
        completion.reasoning_tokens,
        completion.cached_tokens,
    ) == (tokens["prompt"], tokens["completion"], tokens["reasoning"], tokens["cached"])
    kinds: dict[str, int] = {}
    for detail in completion.reasoning_details:
        kinds[detail["type"]] = kinds.get(detail["type"], 0) + 1
    assert kinds == expected["reasoning_details"]


@pytest.mark.parametrize("name", FILES)
def test_capture_read_a_byte_at_a_time_reaches_its_expectation(name: str) -> None:
    """Every split point, through the same reader `python -m gateway_client replay` uses."""
    actual = replayed((STREAMS / name).read_bytes(), 1)
    assert mismatches(EXPECTED[name]["expected"], actual) == []


async def test_gpt_oss_harmony_channels_in_content_become_reasoning_and_answer() -> None:
    """llama-server b6097 without a reasoning format streams gpt-oss's channels as content."""
    body = (STREAMS / "llamacpp-gptoss-harmony-in-content.sse").read_bytes()
    async with serve(body, None) as (url, _):
        completion = await stream_all(url, "llamacpp", FAST)
    assert completion.reasoning == (
        'User says "test". Likely wants a test response. We\'ll respond acknowledging.'
    )
    assert completion.content == (
        "Got it! If you have any questions or need assistance, just let me know."
    )


async def keepalives_until_timeout(
    prefix: bytes, timeouts: Timeouts
) -> tuple[GatewayTimeout, float, float, list[float]]:
    """Serve `prefix`, then the captured keep-alive every 0.1 s until the client gives up.
    Returns the timeout, when the prefix was sent, when the timeout was seen, and when each
    keep-alive was sent (all loop times)."""
    loop = asyncio.get_running_loop()
    sent: list[float] = []
    prefix_sent: list[float] = []

    async def script(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(prefix)
        prefix_sent.append(loop.time())
        for _ in range(200):
            await peer.chunk(KEEPALIVE + b"\n\n")
            sent.append(loop.time())
            await asyncio.sleep(0.1)  # the pacing under test: well inside either deadline

    async with raw_server(script) as (url, _):
        with pytest.raises(GatewayTimeout) as caught:
            await stream_all(url, "openrouter", timeouts)
        seen = loop.time()
    return caught.value, prefix_sent[0], seen, sent


async def test_keepalives_before_the_first_chunk_do_not_meet_the_first_token_deadline() -> None:
    timeouts = FAST.with_(first_token=0.6)
    error, _, seen, sent = await keepalives_until_timeout(b"", timeouts)
    assert error.phase == "first_token"
    assert len([at for at in sent if at < seen]) >= 3, "keep-alives kept arriving meanwhile"
    assert error.completion is not None
    assert error.completion.content == error.completion.reasoning == ""


async def test_keepalives_mid_stream_do_not_reset_the_idle_deadline() -> None:
    """The grok capture pauses its reasoning for two keep-alives; keep sending them instead."""
    name = "openrouter-grok-reasoning-keepalive.sse"
    body = (STREAMS / name).read_bytes()
    pause = body.index(b"\n" + KEEPALIVE, body.index(b"data: ")) + 1
    timeouts = FAST.with_(idle=0.6)
    error, last_chunk, seen, sent = await keepalives_until_timeout(body[:pause], timeouts)
    assert error.phase == "idle"
    assert seen - last_chunk >= timeouts.idle
    assert len([at for at in sent if last_chunk <= at < seen]) >= 3, "keep-alives kept arriving"
    assert error.completion is not None
    assert error.completion.reasoning == EXPECTED[name]["expected"]["reasoning"]
    assert error.completion.content == ""
    assert error.completion.outcome == "error"
