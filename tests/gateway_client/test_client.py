"""GatewayClient: status and content-type checks, retries, deadlines, caps, drops and cancel.

Where a socket adds nothing the gateway is an `httpx.MockTransport`; drips, stalls, drops, huge
lines and hang-ups go over a scripted server on loopback (`rawserver`).
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import httpx
import pytest

from gateway_client import (
    ConnectError,
    GatewayClient,
    GatewayTimeout,
    InBandError,
    IncompleteStream,
    LimitExceeded,
    Limits,
    ProtocolError,
    StatusError,
    Timeouts,
)
from gateway_client.events import Done, ReasoningDelta, TextDelta
from gateway_client.transport import KEEPALIVE

from .rawserver import Peer, raw_server

CHUNK = '{"id":"gen-1","model":"m","choices":[{"index":0,"delta":{"content":%s}}]}'
FINISH = '{"id":"gen-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
USAGE = '{"id":"gen-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"cost":0.5}}'
FAST = Timeouts(connect=2, first_token=2, idle=2, total=10)


def sse(*payloads: str) -> bytes:
    return b"".join(b"data: " + p.encode() + b"\n\n" for p in payloads)


def text(value: str) -> str:
    return CHUNK % json.dumps(value)


def mock(handler: httpx.MockTransport | None = None, **kwargs: object) -> GatewayClient:
    return GatewayClient("https://gw.example/api/v1", "sk-test", transport=handler, **kwargs)


def respond(status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None):
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(
            status, content=body, headers={"content-type": content_type, **(headers or {})}
        )

    return httpx.MockTransport(handler), calls


async def collect(client: GatewayClient, **kwargs: object) -> list[object]:
    async with client.stream_chat(
        model="m", messages=[{"role": "user", "content": "hi"}], **kwargs
    ) as stream:
        return [event async for event in stream]


# Before the stream ---------------------------------------------------------------------------


async def test_error_status_raises_with_the_envelope_fields() -> None:
    body = json.dumps(
        {
            "error": {
                "code": 402,
                "message": "Insufficient credits",
                "metadata": {"error_type": "insufficient_credits"},
            }
        }
    ).encode()
    transport, calls = respond(402, body, "application/json", {"x-request-id": "req-9"})
    async with mock(transport) as client:
        with pytest.raises(StatusError) as caught:
            await collect(client)
    error = caught.value
    assert (error.status, error.code, error.type) == (402, 402, "insufficient_credits")
    assert error.message == "Insufficient credits"
    assert error.request_id == "req-9"
    assert len(calls) == 1  # 402 is not retryable


async def test_request_body_and_auth() -> None:
    transport, calls = respond(200, sse(text("a"), "[DONE]"), "text/event-stream")
    async with mock(transport) as client:
        await collect(client, max_tokens=7, tools=[{"type": "function"}])
    request = calls[0]
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.url.path == "/api/v1/chat/completions"
    body = json.loads(request.content)
    assert body["stream"] is True
    assert body["max_tokens"] == 7
    assert body["tools"]


async def test_rate_limit_with_short_retry_after_is_retried_once() -> None:
    responses = [
        httpx.Response(
            429, json={"error": {"code": 429, "message": "slow down"}}, headers={"retry-after": "0"}
        ),
        httpx.Response(
            200, content=sse(text("ok"), "[DONE]"), headers={"content-type": "text/event-stream"}
        ),
    ]
    transport = httpx.MockTransport(lambda request: responses.pop(0))
    async with mock(transport) as client:
        events = await collect(client)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]


async def test_rate_limit_with_long_retry_after_is_not_retried() -> None:
    body = b'{"error":{"code":429,"message":"slow down"}}'
    transport, calls = respond(429, body, "application/json", {"retry-after": "60"})
    async with mock(transport) as client:
        with pytest.raises(StatusError) as caught:
            await collect(client)
    assert caught.value.retry_after == 60
    assert len(calls) == 1


async def test_unavailable_is_retried_only_once() -> None:
    body = json.dumps(
        {
            "error": {
                "type": "provider_error",
                "code": "provider_unavailable",
                "message": "All routes failed",
            }
        }
    ).encode()
    transport, calls = respond(503, body, "application/json", {"retry-after": "0"})
    async with mock(transport) as client:
        with pytest.raises(StatusError) as caught:
            await collect(client)
    assert caught.value.code == "provider_unavailable"
    assert len(calls) == 2


async def test_proxy_html_page_is_a_clear_error() -> None:
    page = (
        b"<html><head><title>502 Bad Gateway</title></head>"
        b"<body><h1>502 Bad Gateway</h1></body></html>"
    )
    transport, _ = respond(502, page, "text/html")
    async with mock(transport) as client:
        with pytest.raises(StatusError) as caught:
            await collect(client)
    assert caught.value.status == 502
    assert "not JSON" in caught.value.message
    assert "502 Bad Gateway" in caught.value.message


async def test_ok_status_that_is_not_an_event_stream_is_an_error() -> None:
    transport, _ = respond(200, b'{"choices":[]}', "application/json")
    async with mock(transport) as client:
        with pytest.raises(StatusError, match="expected an event stream"):
            await collect(client)


# In the stream -------------------------------------------------------------------------------


async def test_complete_stream_folds_into_a_completion() -> None:
    body = sse(text("Hel"), text("lo"), FINISH, USAGE, "[DONE]") + b"data: trailing junk\n\n"
    transport, _ = respond(200, body, "text/event-stream", {"x-generation-id": "gen-1"})
    async with mock(transport) as client, client.stream_chat(model="m", messages=[]) as stream:
        events = [event async for event in stream]
        completion = stream.completion
    assert isinstance(events[-1], Done)
    assert completion.outcome == "complete"
    assert (completion.content, completion.finish_reason) == ("Hello", "stop")
    assert completion.generation_id == "gen-1"
    assert completion.cost is not None
    assert completion.cost.amount == 0.5
    assert stream.time_to_first_token is not None


async def test_in_band_error_raises_with_the_partial_answer() -> None:
    error = '{"error":{"type":"server_error","code":"upstream_stall","message":"stalled"}}'
    transport, _ = respond(200, sse(text("Hel"), error), "text/event-stream")
    async with mock(transport) as client:
        with pytest.raises(InBandError) as caught:
            await collect(client)
    assert caught.value.code == "upstream_stall"
    assert caught.value.completion is not None
    assert caught.value.completion.content == "Hel"
    assert caught.value.completion.outcome == "error"


async def test_malformed_payload_is_a_protocol_error_keeping_what_came_before() -> None:
    transport, _ = respond(200, sse(text("kept"), "{not json", text("never")), "text/event-stream")
    async with mock(transport) as client:
        with pytest.raises(ProtocolError, match="malformed event") as caught:
            await collect(client)
    assert caught.value.completion is not None
    assert caught.value.completion.content == "kept"


async def test_body_without_done_is_incomplete() -> None:
    transport, _ = respond(200, sse(text("half")), "text/event-stream")
    async with mock(transport) as client:
        with pytest.raises(IncompleteStream) as caught:
            await collect(client)
    assert caught.value.completion is not None
    assert caught.value.completion.outcome == "incomplete"
    assert caught.value.completion.content == "half"


# Over a real socket --------------------------------------------------------------------------


async def test_connection_refused_is_a_connect_error() -> None:
    async with raw_server(lambda peer: asyncio.sleep(0)) as (url, _):
        pass  # the port is closed again
    async with GatewayClient(url, "k", timeouts=FAST) as client:
        with pytest.raises(ConnectError, match=r"^could not reach 127\.0\.0\.1: "):
            await collect(client)


async def test_a_gateway_hanging_up_before_answering_is_a_connect_error_not_a_timeout() -> None:
    async def hang_up(peer: Peer) -> None:
        peer.writer.close()

    async with (
        raw_server(hang_up) as (url, peers),
        GatewayClient(url, "k", timeouts=FAST) as client,
    ):
        with pytest.raises(ConnectError) as caught:
            await collect(client)
    assert not isinstance(caught.value, GatewayTimeout)
    assert str(caught.value).startswith("127.0.0.1 closed the connection before answering: ")
    assert len(peers) == 2, "sent once more on a new connection, then given up"


async def test_a_kept_alive_connection_closed_by_the_server_is_not_a_failure() -> None:
    async def answer_then_close_on_the_next(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(sse(text("one"), "[DONE]"))
        await peer.end()
        # The next request comes on this kept-alive connection just as the server's keep-alive
        # timeout closes it: no byte of a response.
        await peer.reader.readuntil(b"\r\n\r\n")
        peer.writer.close()

    server = raw_server(answer_then_close_on_the_next)
    async with server as (url, peers), GatewayClient(url, "k", timeouts=FAST) as client:
        assert TextDelta("one") in await collect(client)
        assert TextDelta("one") in await collect(client), "sent again on a new connection"
    assert len(peers) == 2


async def test_no_response_hits_the_first_token_deadline() -> None:
    async def silent(peer: Peer) -> None:
        await peer.wait_closed_by_client()

    timeouts = FAST.with_(first_token=0.3)
    async with raw_server(silent) as (url, _), GatewayClient(url, "k", timeouts=timeouts) as client:
        with pytest.raises(GatewayTimeout) as caught:
            await collect(client)
    assert caught.value.phase == "first_token"


async def test_stall_ends_at_the_idle_deadline_keeping_the_partial() -> None:
    async def stall(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(sse(text("So far")))
        await peer.wait_closed_by_client()

    timeouts = FAST.with_(idle=0.3)
    loop = asyncio.get_running_loop()
    async with raw_server(stall) as (url, _), GatewayClient(url, "k", timeouts=timeouts) as client:
        started = loop.time()
        with pytest.raises(GatewayTimeout) as caught:
            await collect(client)
        elapsed = loop.time() - started
    assert caught.value.phase == "idle"
    assert caught.value.completion is not None
    assert caught.value.completion.content == "So far"
    assert caught.value.completion.outcome == "error"
    assert elapsed >= timeouts.idle, "ended by the idle deadline once it had passed"


async def test_slow_drip_without_a_whole_event_ends_at_the_idle_deadline() -> None:
    async def drip(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(sse(text("first")))
        for byte in sse(text("never finished")):
            await peer.chunk(bytes([byte]))
            await asyncio.sleep(0.4)  # the pacing under test: a byte well inside the idle deadline

    timeouts = FAST.with_(idle=1.0)
    async with raw_server(drip) as (url, _), GatewayClient(url, "k", timeouts=timeouts) as client:
        with pytest.raises(GatewayTimeout) as caught:
            await collect(client)
    assert caught.value.phase == "idle"
    assert caught.value.completion is not None
    assert caught.value.completion.content == "first"


async def test_a_50_mb_line_hits_the_line_cap_with_bounded_memory() -> None:
    async def huge(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(sse(text("before")))
        await peer.chunk(b'data: {"x":"')
        block = b"a" * (1024 * 1024)
        for _ in range(50):
            await peer.chunk(block)

    limits = Limits(max_line_bytes=4 * 1024 * 1024)
    async with (
        raw_server(huge) as (url, _),
        GatewayClient(url, "k", timeouts=FAST, limits=limits) as client,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(LimitExceeded, match="line is longer") as caught:
                await collect(client)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert caught.value.completion is not None
    assert caught.value.completion.content == "before"
    assert peak < 16 * 1024 * 1024


async def test_an_endless_stream_hits_the_body_cap() -> None:
    async def endless(peer: Peer) -> None:
        await peer.head()
        piece = sse(*[text("more ")] * 100)
        while True:
            await peer.chunk(piece)

    limits = Limits(max_body_bytes=2 * 1024 * 1024)
    async with (
        raw_server(endless) as (url, _),
        GatewayClient(url, "k", timeouts=FAST, limits=limits) as client,
    ):
        with pytest.raises(LimitExceeded, match="grew past") as caught:
            await collect(client)
    assert caught.value.completion is not None
    assert caught.value.completion.content.startswith("more more ")


async def test_an_endless_stream_hits_the_total_deadline() -> None:
    async def endless(peer: Peer) -> None:
        await peer.head()
        while True:
            await peer.chunk(sse(text("x")))
            await asyncio.sleep(0.01)  # the pacing under test: never idle, only ever too long

    async with (
        raw_server(endless) as (url, _),
        GatewayClient(url, "k", timeouts=FAST.with_(total=0.5)) as client,
    ):
        with pytest.raises(GatewayTimeout) as caught:
            await collect(client)
    assert caught.value.phase == "total"
    assert caught.value.completion is not None
    assert caught.value.completion.content


async def test_dropped_connection_is_incomplete() -> None:
    async def drop(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(sse(text("cut")))
        peer.writer.transport.abort()

    async with raw_server(drop) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        with pytest.raises(IncompleteStream, match="before \\[DONE\\]") as caught:
            await collect(client)
    assert caught.value.completion is not None
    assert caught.value.completion.content == "cut"


async def test_leaving_the_block_closes_the_connection_at_once() -> None:
    seen: asyncio.Queue[float] = asyncio.Queue()

    async def forever(peer: Peer) -> None:
        await peer.head()
        await peer.chunk(sse(text("one")))
        await seen.put(await peer.wait_closed_by_client())

    loop = asyncio.get_running_loop()
    async with raw_server(forever) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        async with client.stream_chat(model="m", messages=[]) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
        closed = loop.time()
        noticed = await asyncio.wait_for(seen.get(), 2 * KEEPALIVE)
    assert noticed - closed < KEEPALIVE, "closed on leaving, not kept for reuse until it idled out"


async def test_think_tags_at_the_start_of_content_are_reasoning_across_chunks() -> None:
    async def thinking(peer: Peer) -> None:
        await peer.head()
        for piece in ("<thi", "nk>Compare ", "both.</thi", "nk>\n\nThe second.", "[DONE]"):
            await peer.chunk(sse(piece if piece == "[DONE]" else text(piece)))
        await peer.end()

    server = raw_server(thinking)
    async with server as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        stream = client.stream_chat(model="m", messages=[])
        async with stream:
            events = [event async for event in stream]
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Compare ", "both."]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The second."]
    assert stream.completion.content == "The second."
    assert stream.completion.reasoning == "Compare both."


@pytest.mark.parametrize(
    ("code", "said"),
    [
        (503, "HTTP 503: overloaded"),
        ("503", "HTTP 503: overloaded"),  # LiteLLM's code is the status, as a string
        ("model_overloaded", "HTTP 503 model_overloaded: overloaded"),
        (None, "HTTP 503: overloaded"),
    ],
)
def test_a_status_error_says_its_code_once(code: int | str | None, said: str) -> None:
    assert str(StatusError("overloaded", status=503, code=code)) == said
