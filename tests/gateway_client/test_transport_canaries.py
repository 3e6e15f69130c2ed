"""Canaries for `gateway_client/transport.py`: each pins the httpx-aiohttp (0.2) internals
`GatewayTransport` relies on, over a real socket, so that an upgrade that changes them fails
here, by name, rather than as a session made on the wrong loop, a capped pool, a refused connect
said as a timeout, or a stale kept-alive connection no longer sent again.

They pin behaviours, never version numbers: the stock `AiohttpTransport`, as our subclass finds it.
"""

from __future__ import annotations

import socket
import ssl

import aiohttp
import httpx
import pytest
from httpx_aiohttp import AiohttpTransport

from gateway_client.transport import GatewayTransport

from .rawserver import Peer, raw_server

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def answer_ok(peer: Peer) -> None:
    peer.writer.write(OK)
    await peer.writer.drain()


async def hang_up(peer: Peer) -> None:
    """Read the request, then close without a byte of an answer (a stale kept-alive socket)."""
    peer.writer.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed on leaving: nothing listens there


def test_the_transport_keeps_its_tls_context_and_a_client_we_may_replace() -> None:
    """`_new_session` reads `ssl_context`; `__init__` sets `client` to what we replace."""
    transport = AiohttpTransport()
    assert isinstance(transport.ssl_context, ssl.SSLContext)
    assert transport.client is None


async def test_a_callable_client_is_called_on_the_first_request_and_its_session_kept() -> None:
    """An aiohttp session belongs to the loop it is made on: ours is made by the first request."""
    made: list[aiohttp.ClientSession] = []

    def session() -> aiohttp.ClientSession:
        made.append(aiohttp.ClientSession())
        return made[-1]

    transport = AiohttpTransport()
    transport.client = session
    async with raw_server(answer_ok) as (url, _), httpx.AsyncClient(transport=transport) as client:
        for _ in range(2):
            assert (await client.get(url)).text == "ok"
        assert transport.client is made[0]
    assert len(made) == 1
    assert made[0].closed, "closing the transport closes the session it was given"


async def test_a_refused_connect_comes_as_connect_timeout_caused_by_aiohttps_error() -> None:
    """The package maps every `ClientConnectionError` to `ConnectTimeout`; ours reads the
    cause to say which it was (`ConnectError` here)."""
    url = f"http://127.0.0.1:{closed_port()}/"
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.ConnectTimeout) as raised:
            await client.get(url)
    assert isinstance(raised.value.__cause__, aiohttp.ClientConnectorError)
    async with httpx.AsyncClient(transport=GatewayTransport()) as ours:
        with pytest.raises(httpx.ConnectError):
            await ours.get(url)


async def test_a_hang_up_before_any_byte_is_connect_timeout_caused_by_a_disconnect() -> None:
    """What `GatewayTransport` sends once more on a new connection (a stale kept-alive one)."""
    stock = httpx.AsyncClient(transport=AiohttpTransport())
    async with raw_server(hang_up) as (url, peers), stock:
        with pytest.raises(httpx.ConnectTimeout) as raised:
            await stock.post(url, content=b"{}")  # a stream's request: aiohttp sends it once
    assert isinstance(raised.value.__cause__, aiohttp.ServerDisconnectedError)
    assert len(peers) == 1, "the stock transport does not send it again: ours does"
