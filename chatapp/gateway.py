"""Where the gateway is, the process's client for it, and the calls the views make to it.

With no `LLM_BASE_URL` the built-in emulator is started in this process on first use, on its own
thread and loopback port, so `make run` needs no other process. Streams go over real loopback
HTTP: an in-process ASGI transport would buffer whole bodies and defeat streaming.

One long-lived `GatewayClient` per gateway per event loop is borrowed by every generation. A
client per generation built a TLS context and a connection pool each time (14-27 ms of CPU on the
event loop, ~0.85 MB), a fifth of the server's time at a burst of new chats; shared, keep-alive
connections and one TLS context serve every stream. A generation never closes the client: Stop
closes that generation's response, which closes its connection alone (a body not read to the end
cannot go back to the pool). Clients are keyed by loop too, because an httpx client belongs to the
loop that opened its connections (tests run one loop each; a server runs one). `close_clients`
runs at server shutdown (see `asgi.py`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

from django.conf import settings

from gateway_client import GatewayClient, Timeouts
from gateway_client.dialects import default_timeouts, guess_dialect
from gateway_client.errors import GatewayError

logger = logging.getLogger(__name__)

EMULATOR_API_KEY = "emulator-key"
MODELS_TTL = 60.0

_emulator_lock = threading.Lock()
_emulator: tuple[AbstractContextManager[str], str] | None = None
_models_cache: dict[str, tuple[float, list[str]]] = {}
_clients: dict[tuple[asyncio.AbstractEventLoop, GatewayConfig], GatewayClient] = {}


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    base_url: str
    api_key: str
    emulated: bool


def emulator_base_url() -> str:
    """Start the emulator once per process (thread-safe) and return its Numes base URL."""
    global _emulator
    with _emulator_lock:
        if _emulator is None:
            from gateway_client.emulator import serve_in_thread

            # A stalled demo stream gives up after 10 s, not the documented 10 minutes.
            manager = serve_in_thread(stall_limit_s=10.0)
            url = manager.__enter__()
            _emulator = (manager, url)
            logger.info("Started the built-in gateway emulator at %s", url)
        return f"{_emulator[1]}/numes/api/v1"


def gateway_config() -> GatewayConfig:
    if settings.LLM_BASE_URL:
        return GatewayConfig(settings.LLM_BASE_URL, settings.LLM_API_KEY or "", emulated=False)
    return GatewayConfig(emulator_base_url(), EMULATOR_API_KEY, emulated=True)


def timeouts(base_url: str) -> Timeouts | None:
    """The deadlines set in the environment over the dialect's defaults; None when none is set,
    so the client keeps refining its defaults from what the gateway's headers reveal."""
    if not settings.LLM_TIMEOUTS:
        return None
    dialect = settings.LLM_DIALECT or guess_dialect(base_url)
    return default_timeouts(dialect).with_(**settings.LLM_TIMEOUTS)


def make_client(config: GatewayConfig) -> GatewayClient:
    return GatewayClient(
        config.base_url,
        config.api_key,
        dialect=settings.LLM_DIALECT,
        timeouts=timeouts(config.base_url),
    )


async def list_models() -> tuple[list[str], str | None]:
    """The gateway's model IDs (cached briefly) and an error message when it could not say."""
    config = gateway_config()
    cached = _models_cache.get(config.base_url)
    if cached and time.monotonic() - cached[0] < MODELS_TTL:
        return cached[1], None
    try:
        models = sorted(m.id for m in await shared_client(config).list_models())
    except GatewayError as exc:
        logger.warning("Could not list models from %s: %s", config.base_url, exc)
        return (cached[1] if cached else []), f"Could not load the model list: {exc}"
    _models_cache[config.base_url] = (time.monotonic(), models)
    return models, None


def shared_client(config: GatewayConfig | None = None) -> GatewayClient:
    """The client for `config` (the configured gateway by default) on the running loop."""
    loop = asyncio.get_running_loop()
    key = (loop, config or gateway_config())
    gw = _clients.get(key)
    if gw is None:
        for stale in [stale for stale in _clients if stale[0].is_closed()]:
            del _clients[stale]
        gw = _clients[key] = make_client(key[1])
    return gw


async def close_clients() -> None:
    """Close the running loop's clients (server shutdown)."""
    loop = asyncio.get_running_loop()
    for key in [key for key in _clients if key[0] is loop]:
        gw = _clients.pop(key)
        try:
            await gw.aclose()
        except Exception:  # shutting down: one client's failure must not keep the others open
            logger.exception("Closing the client for %s failed", key[1].base_url)
