"""Waiting for a condition, never for a fixed time: the one pair of helpers every test uses.

`eventually` is for async tests (the loop keeps running between polls, so the code under test
does too); `poll` is for sync tests and for code on a thread, such as a Playwright test or a
patched function the server calls in its executor.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

INTERVAL = 0.01


async def eventually[T](
    condition: Callable[[], T | Awaitable[T | None] | None], *, what: str, within: float = 10.0
) -> T:
    """Poll `condition` (plain or async) until it returns something truthy, and return that;
    fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        await asyncio.sleep(INTERVAL)


def poll[T](condition: Callable[[], T | None], *, what: str, within: float = 15.0) -> T:
    """`eventually` for sync code: blocks the calling thread between polls."""
    deadline = time.monotonic() + within
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        time.sleep(INTERVAL)
    return value
