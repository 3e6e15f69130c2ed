"""Gives the memory the allocator keeps back to the system, as answers end.

glibc keeps what a process frees for its own next allocations, in each arena, and returns it
only from the top of a heap. An answer's transient objects (events, deltas, frames, renders) are
freed as it ends, but the pages they lay on mostly stay with the process: `benchmarks load
--growth 1000` grew the server's RSS from 202 to 273 MB over 1,000 answers with Python's objects
and malloc's bytes in use steady, and one `malloc_trim(0)` gave 58 MB of it back. So when an
answer ends, at most once per `CHAT_MALLOC_TRIM_INTERVAL` seconds while others run and at once
as the last one ends, the process calls `malloc_trim(0)` in a thread: it releases the free pages
of every arena (`madvise`), costs a few milliseconds, and ctypes lets go of the GIL for it, so
the loop goes on meanwhile. Where the C library has no `malloc_trim` (musl, macOS) nothing
happens. See docs/deployment.md, "Memory".
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

from django.conf import settings

logger = logging.getLogger(__name__)


def _find_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


_malloc_trim = _find_trim()
_last = float("-inf")  # when the last trim started (the loop's clock)
_running: asyncio.Future[None] | None = None


def answer_ended(*, last: bool) -> None:
    """An answer ended on this loop (the `last` one running): trim the allocator's free memory
    if none is under way and the interval has passed since the last trim, or at once when no
    answer runs any more, so that what a burst of answers freed goes back as the burst ends."""
    global _last, _running
    interval = settings.CHAT_MALLOC_TRIM_INTERVAL
    if _malloc_trim is None or interval <= 0 or (_running is not None and not _running.done()):
        return
    loop = asyncio.get_running_loop()
    now = loop.time()
    if now - _last < interval and not last:
        return
    _last = now
    _running = loop.run_in_executor(None, _trim)


def _trim() -> None:
    assert _malloc_trim is not None
    try:
        _malloc_trim(0)
    except Exception:  # never worth failing anything for
        logger.exception("malloc_trim failed")
