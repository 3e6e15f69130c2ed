"""The process's client for each gateway: one long-lived `GatewayClient` per gateway per loop.

One client per gateway per event loop is borrowed by every generation. A
client per generation built a TLS context and a connection pool each time (14-27 ms of CPU on the
event loop, ~0.85 MB), a fifth of the server's time at a burst of new chats; shared, keep-alive
connections and one TLS context serve every stream. A generation never closes the client: Stop
closes that generation's response, which closes its connection alone (a body not read to the end
cannot go back to the pool). Clients are keyed by loop too, because an httpx client belongs to the
loop that opened its connections (tests run one loop each; a server runs one). `close_clients`
runs at server shutdown (see `asgi.py`).

A client also closes with its loop: a loop that ends (`asyncio.run`, `async_to_sync` outside a
server, as a management command or Django's test client runs an async view, each test's loop)
cancels the tasks left on it, and one waits there per client to close it. Left open, the loop's
end dropped the client unclosed, and aiohttp logged "Unclosed client session" for each at exit.
"""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from chatapp.gateways.configs import GatewayConfig
from gateway_client import GatewayClient, Timeouts
from gateway_client.dialects import default_timeouts, guess_dialect

logger = logging.getLogger(__name__)

_clients: dict[tuple[asyncio.AbstractEventLoop, GatewayConfig], GatewayClient] = {}


def timeouts(config: GatewayConfig) -> Timeouts | None:
    """The deadlines set in the environment over the dialect's defaults; None when none is set,
    so the client keeps refining its defaults from what the gateway's headers reveal."""
    if not settings.LLM_TIMEOUTS:
        return None
    dialect = config.dialect or guess_dialect(config.base_url)
    return default_timeouts(dialect).with_(**settings.LLM_TIMEOUTS)


def make_client(config: GatewayConfig) -> GatewayClient:
    return GatewayClient(
        config.base_url,
        config.api_key,
        dialect=config.dialect,
        timeouts=timeouts(config),
    )


def shared_client(config: GatewayConfig) -> GatewayClient:
    """The client for `config` on the running loop."""
    loop = asyncio.get_running_loop()
    key = (loop, config)
    gw = _clients.get(key)
    if gw is None:
        for stale in [stale for stale in _clients if stale[0].is_closed()]:
            del _clients[stale]
        gw = _clients[key] = make_client(key[1])
        closer = loop.create_task(_close_with_loop(key, gw), name="close gateway client")
        _closers.add(closer)
        closer.add_done_callback(_closers.discard)
    return gw


_closers: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones


async def _close_with_loop(
    key: tuple[asyncio.AbstractEventLoop, GatewayConfig], gw: GatewayClient
) -> None:
    """Wait for the loop's end (its remaining tasks are cancelled), then close `gw` on it."""
    try:
        await asyncio.Future()  # never set: only a cancellation ends the wait
    finally:
        if _clients.get(key) is gw:
            del _clients[key]
        try:
            await gw.aclose()  # a second close (after `close_clients`) does nothing
        except Exception:
            logger.exception("Closing the client for %s failed", key[1].base_url)


async def close_clients() -> None:
    """Close the running loop's clients (server shutdown)."""
    loop = asyncio.get_running_loop()
    for key in [key for key in _clients if key[0] is loop]:
        gw = _clients.pop(key)
        try:
            await gw.aclose()
        except Exception:  # shutting down: one client's failure must not keep the others open
            logger.exception("Closing the client for %s failed", key[1].base_url)
