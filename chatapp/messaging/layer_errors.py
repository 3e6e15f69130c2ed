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
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

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
_quieted: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
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


def quiet_background_failures(loop: asyncio.AbstractEventLoop) -> None:
    """Report the Redis layer's own background tasks failing in an outage in one line (once per
    loop: the ticker and the consumers both ask).

    channels_redis cleans up after a receive in a task nobody awaits (`_clean_receive_backup`);
    when Redis goes away under it, asyncio logs "Task exception was never retrieved" with the
    whole traceback. Only such failures of the layer's tasks are turned into a warning; any
    other goes to the handler there was before.
    """
    if loop in _quieted:
        return
    _quieted.add(loop)
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, LAYER_DOWN) and _is_layer_task(context.get("future")):
            logger.warning("The channel layer is down: a background task failed (%s)", error)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def _is_layer_task(future: object) -> bool:
    coroutine = future.get_coro() if isinstance(future, asyncio.Task) else None
    code = getattr(coroutine, "cr_code", None)
    return code is not None and "channels_redis" in code.co_filename
