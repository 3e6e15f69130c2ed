"""What a channel layer raises while its server is away, and a send that rides that out.

With the Redis layer a restart or a network blip makes every send and receive fail for a moment
(redis-py's `ConnectionError` and `TimeoutError`, which are not the built-in ones, or an
`OSError` from the socket). That is an outage to report in one line and recover from, not a bug
to log with its traceback: deltas are numbered, so a page that missed some asks for a snapshot,
and a page whose socket closed reconnects and is sent one. Only `done` has no later message to
reveal its loss, so it is retried for a while (`send_retrying`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


def _layer_down() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]  # ConnectionError and TimeoutError too
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # the in-memory layer only: nothing else to catch
        pass
    else:
        errors += [RedisConnectionError, RedisTimeoutError]
    return tuple(errors)


LAYER_DOWN = _layer_down()
RETRY_FOR = 10.0  # seconds a message no later one can replace is retried (a Redis restart)


async def send_retrying(send: Callable[[], Awaitable[None]], what: str) -> bool:
    """Await `send()`, retrying with backoff for `RETRY_FOR` seconds while the layer is down;
    False (logged) if it never went."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RETRY_FOR
    delay = 0.05
    while True:
        try:
            await send()
            return True
        except LAYER_DOWN as exc:
            if loop.time() + delay > deadline:
                logger.warning("The channel layer is down: %s was not sent (%s)", what, exc)
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
