"""Generation records, disconnect detection, pacing, mounting and the command line.

The emulator must notice a client that goes away even while it is silent (it watches
`http.disconnect` rather than waiting for a write to fail), long before the silence would end,
stop generating, and record the generation as `cancelled` with what was delivered; records read
`in_progress` briefly first. How fast it notices is the benchmarks' to measure.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from gateway_client.emulator import (
    EmulatorRecord,
    EmulatorURL,
    Registry,
    create_app,
    serve_in_thread,
)
from tests.gateway_client.test_emulator import (
    AUTH,
    BASES,
    DIALECTS,
    Event,
    chat_body,
    http,
    iter_events,
    stream,
)
from tests.waiting import eventually


async def drain(body: AsyncIterator[bytes]) -> None:
    async for _ in body:
        pass


STALL_TOKENS = 8  # what the `stall` scenario delivers before it falls silent
SILENCE_NOTICED = 10.0  # seconds; far below any stall, far above a loaded machine's delay
SLOW_START_S = 8.0  # the `slow-start` scenario's default silence before its first byte


def registry(url: str) -> Registry:
    records: Registry = url.app.records  # type: ignore[attr-defined]
    return records


async def finished(url: str, key: str) -> EmulatorRecord:
    """The record `key` once its stream has ended; polled off the event loop, which the
    registry's blocking wait would otherwise stall."""
    return await asyncio.to_thread(registry(url).wait_finished, key)


async def settled(url: str, key: str) -> EmulatorRecord:
    """The record `key` once it shows its final outcome (after the finalisation window)."""
    return await asyncio.to_thread(registry(url).wait_settled, key)


async def new_record(url: str, before: set[str], **match: Any) -> EmulatorRecord:
    """The first record not in `before` whose attributes equal `match`."""

    def find() -> EmulatorRecord | None:
        return next(
            (
                record
                for record in registry(url).all()
                if record.id not in before
                and all(getattr(record, key) == value for key, value in match.items())
            ),
            None,
        )

    return await eventually(find, what=f"the emulator to record the request ({match})")


@contextlib.asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[EmulatorURL]:
    """`serve_in_thread`, entered and left off the event loop: both block (starting polls until
    the server is up, leaving joins the server's thread)."""
    manager = serve_in_thread(**options)
    url = await asyncio.to_thread(manager.__enter__)
    try:
        yield url
    except BaseException as exc:
        if not await asyncio.to_thread(manager.__exit__, type(exc), exc, exc.__traceback__):
            raise
    else:
        await asyncio.to_thread(manager.__exit__, None, None, None)


async def read_then_close(
    url: str,
    body: dict[str, Any],
    data_events: int,
    before_close: Callable[[list[Event]], Awaitable[None]] | None = None,
    **params: Any,
) -> tuple[list[Event], float]:
    """Stream, read `data_events` data events, await `before_close` (if given), close the
    connection; return the events and the wall-clock time of the close."""
    events: list[Event] = []
    async with http() as client:
        request = client.build_request("POST", url, json=body, headers=AUTH, params=params)
        response = await client.send(request, stream=True)
        async with contextlib.aclosing(iter_events(response)) as stream_events:
            async for event in stream_events:
                events.append(event)
                if sum(e.data is not None for e in events) >= data_events:
                    if before_close is not None:
                        await before_close(events)
                    break
        closed_at = time.time()
        await response.aclose()
    return events, closed_at


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_disconnect_while_streaming(emulator_url: str, dialect: str) -> None:
    url = f"{emulator_url}{BASES[dialect]}/chat/completions"
    events, _ = await read_then_close(url, chat_body("long"), 10, tokens_per_second=100)
    chunk_id = events[-1].json["id"]
    record = await finished(emulator_url, chunk_id)
    assert record.final_outcome == "cancelled"
    assert record.outcome == "in_progress", "still finalising"
    assert record.cancelled_at is not None  # at the close: the tokens counted below say so
    seen = sum(1 for e in events if e.data and e.json["choices"][0]["delta"].get("content"))
    assert seen <= record.tokens_completion <= seen + 15  # 100 tok/s: a few in flight at most
    assert record not in registry(emulator_url).active
    assert (await settled(emulator_url, chunk_id)).outcome == "cancelled"


@pytest.mark.parametrize("dialect", ["numes", "nodul"])
async def test_disconnect_during_silence(emulator_url: str, dialect: str) -> None:
    """A stalled stream sends nothing, so only watching `receive()` can notice the close."""
    url = f"{emulator_url}{BASES[dialect]}/chat/completions"

    async def fallen_silent(events: list[Event]) -> None:
        record = registry(emulator_url).get(events[-1].json["id"])
        assert record is not None
        await eventually(
            lambda: record.tokens_completion == STALL_TOKENS, what="every token before the stall"
        )
        assert record.settles_at is None, "still open, and silent"

    events, closed_at = await read_then_close(url, chat_body("stall"), 1, fallen_silent)
    record = await finished(emulator_url, events[-1].json["id"])
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    # The silence lasts 120 s and more (Nodul's documented gap; Numes stays silent up to 10 min):
    # a cancel seconds after the close was noticed, not waited out (no speed is claimed here).
    assert record.cancelled_at - closed_at < SILENCE_NOTICED


async def test_disconnect_before_first_byte(emulator_url: str) -> None:
    """Numes sends nothing at all during a slow start; the client gives up waiting for headers."""
    url = f"{emulator_url}/numes/api/v1/chat/completions"
    before = {record.id for record in registry(emulator_url).all()}
    async with http() as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.4):
                await client.post(url, json=chat_body("slow-start"), headers=AUTH)
    record = await new_record(emulator_url, before, dialect="numes", scenario="slow-start")
    record = await finished(emulator_url, record.id)
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    # Noticed during the slow start, not at its end.
    assert record.created_at < record.cancelled_at < record.created_at + SLOW_START_S
    assert record.tokens_completion == 0


async def test_disconnect_during_buffered_generation(emulator_url: str) -> None:
    url = f"{emulator_url}/osmexo/v1/chat/completions"
    body = chat_body("long", stream=False)
    params = {"tokens_per_second": 200}
    before = {record.id for record in registry(emulator_url).all()}
    async with http() as client:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await client.post(url, json=body, headers=AUTH, params=params)
    # Under load the emulator may only now have taken the request.
    record = await new_record(
        emulator_url, before, dialect="osmexo", scenario="long", streamed=False
    )
    record = await finished(emulator_url, record.id)
    assert record.final_outcome == "cancelled"
    # Billed for what was generated before the hang-up: some tokens, far from the whole answer.
    assert 0 < record.tokens_completion < 1000


async def test_numes_generation_record(emulator_url: str) -> None:
    result = await stream(emulator_url, "numes", chat_body("reasoning"))
    usage = result.chunks[-1]["usage"]
    generation_id = result.response.headers["x-generation-id"]
    async with http(headers=AUTH) as client:
        url = f"{emulator_url}/numes/api/v1/generation"
        first = (await client.get(url, params={"id": generation_id})).json()["data"]
        assert first["outcome"] == "in_progress"
        await settled(emulator_url, generation_id)  # the finalisation window has passed
        data = (await client.get(url, params={"id": generation_id})).json()["data"]
        assert data["id"] == generation_id
        assert data["outcome"] == "completed"
        assert data["finish_reason"] == "stop"
        assert data["streamed"] is True
        assert data["model"] == "emulator/reasoning"
        assert data["tokens_prompt"] == usage["prompt_tokens"]
        assert data["tokens_completion"] == usage["completion_tokens"]
        assert (
            data["native_tokens_reasoning"]
            == usage["completion_tokens_details"]["reasoning_tokens"]
        )
        assert data["native_tokens_cached"] == 0
        assert data["total_cost"] == usage["cost"]
        assert data["created_at"].endswith("Z")

        missing = await client.get(url, params={"id": "no-such-generation"})
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == 404
        assert (await client.get(url)).status_code == 400
        osmexo = await stream(emulator_url, "osmexo", chat_body("echo"))
        other = await client.get(url, params={"id": osmexo.chunks[0]["id"]})
        assert other.status_code == 404, "only Numes generations are exposed"


async def test_numes_generation_record_of_cancelled_stream(emulator_url: str) -> None:
    url = f"{emulator_url}/numes/api/v1/chat/completions"
    events, _ = await read_then_close(url, chat_body("long"), 6, tokens_per_second=100)
    generation_id = events[0].json["id"]
    async with http(headers=AUTH) as client:
        lookup = f"{emulator_url}/numes/api/v1/generation"
        outcomes = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the API shows the outcome once the window passes
            data = (await client.get(lookup, params={"id": generation_id})).json()["data"]
            outcomes.append(data["outcome"])
            if data["outcome"] != "in_progress":
                break
            await asyncio.sleep(0.02)
    assert outcomes[0] == "in_progress"
    assert outcomes[-1] == "cancelled"
    assert data["tokens_completion"] >= 6
    assert data["total_cost"] > 0


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_every_dialect_records_completed_generations(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("echo"))
    record = await finished(emulator_url, result.chunks[0]["id"])
    assert record.final_outcome == "completed"
    assert record.finish_reason == "stop"
    assert record.dialect == dialect
    assert record.tokens_completion == sum(
        1 for c in result.chunks if c["choices"] and c["choices"][0]["delta"].get("content")
    )
    assert record.total_cost > 0
    assert record.first_token_at is not None
    assert record.finished_at is not None


async def test_pacing_and_flushing(emulator_url: str) -> None:
    url = f"{emulator_url}/osmexo/v1/chat/completions"
    params = {"tokens_per_second": 50, "ttft_ms": 200}
    started = time.monotonic()
    arrivals: list[float] = []
    reads = 0
    async with http() as client:
        request = client.build_request(
            "POST", url, json=chat_body("chat"), headers=AUTH, params=params
        )
        response = await client.send(request, stream=True)
        async for raw in response.aiter_raw():
            reads += 1
            arrivals.extend(time.monotonic() for _ in range(raw.count(b"\n\n")))
            if len(arrivals) >= 12:
                break
        await response.aclose()
    # Lower bounds only: the emulator waits at least this long; a loaded machine may add more.
    assert arrivals[1] - started >= 0.2, "time to first token"
    assert arrivals[11] - arrivals[1] >= 0.8 * 10 / 50, "ten tokens paced at 50 per second"
    assert reads >= 10, "each frame is flushed on its own"


async def test_prefix_mount(emulator_url: str) -> None:
    async with serving(tokens_per_second=2000, ttft_ms=5, prefix="/emulator") as url:
        async with http(headers=AUTH) as client:
            models = await client.get(f"{url}/emulator/numes/api/v1/models")
            assert models.status_code == 200
            index = (await client.get(f"{url}/emulator/")).json()
            assert index["gateways"]["nodul"] == "/emulator/nodul/api/v1"
        result = await stream(f"{url}/emulator", "nodul", chat_body("echo"))
        assert result.content == chat_body("echo")["messages"][0]["content"]


async def test_root_path_mount() -> None:
    app = create_app(tokens_per_second=5000, ttft_ms=0)
    transport = httpx.ASGITransport(app=app, root_path="/emulator")
    async with http(transport=transport, base_url="http://test", headers=AUTH) as client:
        response = await client.get("/emulator/tiny/v1/models")
        assert response.status_code == 200
        body = chat_body("echo", stream=False)
        reply = await client.post("/emulator/tiny/v1/chat/completions", json=body)
        assert reply.json()["choices"][0]["message"]["content"] == body["messages"][0]["content"]
    assert app.records.all()[-1].final_outcome == "completed"


@pytest.mark.processes  # a stand-alone emulator: `make test-quick` leaves it out
def test_command_line_serves_four_gateways() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "gateway_client.emulator",
        "--port",
        str(port),
        "--ttft-ms",
        "1",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(4)]
        assert [line.split(": ", 1)[1].strip() for line in lines] == [
            f"http://127.0.0.1:{port}{base}" for base in BASES.values()
        ]
        deadline = time.monotonic() + 10
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/tiny/v1/models", headers=AUTH)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert response.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_shutdown_ends_open_streams_promptly() -> None:
    """Leaving `serve_in_thread` does not wait out a stall (Numes would stay silent 10 min)."""
    async with http() as client:
        async with (
            asyncio.timeout(SILENCE_NOTICED),
            serving(tokens_per_second=2000, ttft_ms=5) as url,
        ):
            request = client.build_request(
                "POST",
                f"{url}/numes/api/v1/chat/completions",
                json=chat_body("stall"),
                headers=AUTH,
            )
            response = await client.send(request, stream=True)
            body = response.aiter_raw()
            received = b""
            while received.count(b"\n\n") < 8:
                received += await anext(body)
        with pytest.raises(httpx.RemoteProtocolError):
            await drain(body)
        await response.aclose()
    record = registry(url).all()[-1]
    assert record.final_outcome == "cancelled"
    assert not registry(url).active
