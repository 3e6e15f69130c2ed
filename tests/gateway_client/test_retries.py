"""One retry budget per answer (`retries`), over a real socket: the requests a scripted gateway
receives for one answer, and when.

The gateway answers each request in turn from a script, on whichever connection it comes, and
keeps connections alive between answers, so that a pooled connection can go stale under one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from gateway_client import GatewayClient, RetryBudget, StatusError, Timeouts
from gateway_client.errors import ConnectError
from gateway_client.events import TextDelta
from gateway_client.retries import retried_already

from .rawserver import Peer, Script, raw_server

# As captured (`tests/fixtures/gateways/litellm/README.md`), head and body.
LITELLM_503 = (
    Path(__file__).parents[1] / "fixtures/gateways/litellm/error-503-after-retries.http"
).read_bytes()
FAST = Timeouts(connect=2, first_token=5, idle=2, total=10)
HANG_UP = b""  # read the request, then close the connection without a byte of an answer


def reply(status: str, headers: str = "", body: bytes | None = None) -> bytes:
    if body is None:
        code = int(status.split()[0])
        body = json.dumps({"error": {"code": code, "message": f"refused ({status})"}}).encode()
        content_type = "application/json"
    else:
        content_type = "text/event-stream"
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
    return f"{head}Content-Length: {len(body)}\r\n{headers}\r\n".encode() + body


OK = reply(
    "200 OK",
    body=b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n',
)
UNAVAILABLE = "503 Service Unavailable"
LITELLM_RETRIED = "x-litellm-attempted-retries: 2\r\nx-litellm-max-retries: 2\r\n"


def scripted(*answers: bytes) -> tuple[Script, list[float]]:
    """A script answering the requests in turn with `answers`; and the loop time each arrived."""
    arrived: list[float] = []
    left = list(answers)

    async def script(peer: Peer) -> None:
        loop = asyncio.get_running_loop()
        while True:
            arrived.append(loop.time())
            answer = left.pop(0)
            if answer == HANG_UP:
                peer.writer.close()
                return
            peer.writer.write(answer)
            await peer.writer.drain()
            head = await peer.reader.readuntil(b"\r\n\r\n")  # the next on this connection
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await peer.reader.readexactly(length)

    return script, arrived


async def answer(client: GatewayClient, retries: RetryBudget | None = None) -> str:
    async with client.stream_chat(
        model="m", messages=[{"role": "user", "content": "hi"}], retries=retries
    ) as stream:
        return "".join([event.text async for event in stream if isinstance(event, TextDelta)])


async def refused(client: GatewayClient) -> StatusError:
    with pytest.raises(StatusError) as caught:
        await answer(client)
    return caught.value


# Whether a refusal is sent again ------------------------------------------------------------


async def test_litellms_own_503_after_its_retries_is_not_sent_again() -> None:
    """As LiteLLM 1.108.7 answers once its `num_retries: 2` are spent: no header says so, but its
    `x-litellm-call-id` names the gateway, and it gave no `Retry-After` of its own."""
    script, arrived = scripted(LITELLM_503, OK)
    async with raw_server(script) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        error = await refused(client)
    assert error.status == 503
    assert error.retry_after is None, "`llm_provider-retry-after` is the provider's, relayed"
    assert len(arrived) == 1


@pytest.mark.parametrize(
    ("headers", "dialect"),
    [
        pytest.param(LITELLM_RETRIED, None, id="says-it-retried"),
        pytest.param(LITELLM_RETRIED + "Retry-After: 1\r\n", None, id="says-it-retried-with-wait"),
        pytest.param("x-litellm-version: 1.74.0\r\n", None, id="litellm-by-its-headers"),
        pytest.param("", "litellm", id="litellm-by-its-dialect"),
    ],
)
async def test_a_5xx_from_a_gateway_that_retried_itself_is_final(
    headers: str, dialect: str | None
) -> None:
    script, arrived = scripted(reply(UNAVAILABLE, headers), OK)
    async with (
        raw_server(script) as (url, _),
        GatewayClient(url, "k", dialect=dialect, timeouts=FAST) as client,
    ):
        error = await refused(client)
        answered = asyncio.get_running_loop().time()
    assert error.status == 503
    assert len(arrived) == 1, "not sent again: the gateway's retries were this answer's"
    assert answered - arrived[0] < 1, "the error is the user's at once"
    if "Retry-After" in headers:
        assert error.retry_after == 1, "its advice goes on to the user"


@pytest.mark.parametrize("headers", ["", "x-litellm-attempted-retries: 0\r\n"])
async def test_a_plain_503_is_sent_again_once_after_a_second(headers: str) -> None:
    script, arrived = scripted(reply(UNAVAILABLE, headers), reply(UNAVAILABLE), OK)
    async with raw_server(script) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        await refused(client)
    assert len(arrived) == 2, "the request and its one resend"
    assert arrived[1] - arrived[0] >= 0.99


async def test_a_429_with_a_short_retry_after_is_sent_again_after_it() -> None:
    script, arrived = scripted(reply("429 Too Many Requests", "Retry-After: 1\r\n"), OK)
    async with raw_server(script) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        assert await answer(client) == "ok"
    assert len(arrived) == 2
    assert arrived[1] - arrived[0] >= 0.99, "sent again only once its Retry-After had passed"


async def test_a_429_with_a_long_retry_after_is_final_and_says_when() -> None:
    script, arrived = scripted(reply("429 Too Many Requests", "Retry-After: 60\r\n"), OK)
    patient = FAST.with_(first_token=120.0, total=None)  # the deadline would allow the wait
    async with raw_server(script) as (url, _), GatewayClient(url, "k", timeouts=patient) as client:
        async with asyncio.timeout(5):  # the user hears within 5 s of the gateway's answer
            error = await refused(client)
    assert error.retry_after == 60
    assert len(arrived) == 1


# One budget across the layers ---------------------------------------------------------------


async def test_a_stale_connection_and_a_503_share_the_answers_one_resend() -> None:
    """The transport sends again over a stale pooled connection; the 503 that answers the resend
    is then final."""
    script, arrived = scripted(OK, HANG_UP, reply(UNAVAILABLE), OK)
    async with raw_server(script) as (url, peers), GatewayClient(url, "k", timeouts=FAST) as client:
        assert await answer(client) == "ok"  # leaves its connection in the pool
        await refused(client)
    assert len(arrived) == 3, "the first answer's one, and the second's request and one resend"
    assert len(peers) == 2, "the second answer's request went on the first's connection"


async def test_a_resend_that_meets_a_stale_connection_is_not_sent_a_third_time() -> None:
    script, arrived = scripted(reply(UNAVAILABLE), HANG_UP, OK)
    async with raw_server(script) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        with pytest.raises(ConnectError, match="closed the connection before answering"):
            await answer(client)
    assert len(arrived) == 2


async def test_a_budget_passed_in_is_the_one_drawn_on() -> None:
    """A caller's budget (the worker's, for one answer) is spent by the client's resend, and
    one that is spent already allows none."""
    budget = RetryBudget()
    script, arrived = scripted(reply(UNAVAILABLE), OK, reply(UNAVAILABLE), OK)
    async with raw_server(script) as (url, _), GatewayClient(url, "k", timeouts=FAST) as client:
        assert await answer(client, budget) == "ok"
        assert (budget.resends, budget.wait) == (0, 4.0)
        with pytest.raises(StatusError):
            await answer(client, budget)
    assert len(arrived) == 3


# The budget and the rule alone --------------------------------------------------------------


def test_a_budget_bounds_both_the_resends_and_the_time_waited() -> None:
    budget = RetryBudget(resends=3, wait=5.0)
    assert budget.spend(3.0)
    assert not budget.spend(2.5), "past the 5 s in all"
    assert budget.spend(2.0)
    assert budget.spend()
    assert not budget.spend(), "past the resends"


@pytest.mark.parametrize(
    ("headers", "retried"),
    [
        ({"x-litellm-attempted-retries": "2"}, True),
        ({"x-litellm-attempted-retries": "0", "x-litellm-attempted-fallbacks": "1"}, True),
        ({"X-Upstream-Attempted-Retries": " 1 "}, True),
        ({"x-litellm-attempted-retries": "0"}, False),
        ({"x-litellm-attempted-retries": "many"}, False),
        ({"x-litellm-max-retries": "2"}, False),
        ({}, False),
    ],
)
def test_a_gateway_says_it_retried_with_an_attempted_retries_header(
    headers: dict[str, str], retried: bool
) -> None:
    assert retried_already(httpx.Headers(headers)) is retried
