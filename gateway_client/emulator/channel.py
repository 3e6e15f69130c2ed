"""ASGI plumbing for one HTTP exchange: read the body, send a response, notice disconnects fast.

A server may silently drop writes to a closed connection (uvicorn does), so a sender cannot
learn of a disconnect by writing. `Channel.watch` runs a task that keeps awaiting `receive()` and
flags the `http.disconnect` the moment it arrives, calling `on_disconnect` with the wall-clock
time; every wait the emulator makes (`pause`, `pause_until`) wakes up early on that flag, so
generation stops within milliseconds of the client going away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextvars import ContextVar
from typing import Any

import orjson

__all__ = ["Channel", "Receive", "Scope", "Send", "quiet_deliberate_aborts"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_SHORT_SLEEP_S = 0.02
_MAX_BODY = 8 * 1024 * 1024
_ABORTING: ContextVar[bool] = ContextVar("gateway_emulator_aborting", default=False)
_ABORT_MESSAGES = frozenset(
    {
        "ASGI callable returned without completing response.",
        "ASGI callable returned without starting response.",
    }
)


class _QuietDeliberateAborts(logging.Filter):
    """Drop the server's complaint about an incomplete response when the emulator broke the
    response off on purpose (same task, flagged by `Channel.abort`); keep every other one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_ABORTING.get() and record.msg in _ABORT_MESSAGES)


_FILTER = _QuietDeliberateAborts()


def quiet_deliberate_aborts() -> None:
    """Install the filter on uvicorn's error logger (idempotent)."""
    logger = logging.getLogger("uvicorn.error")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


class BodyTooLarge(Exception):
    """The request body exceeded the emulator's limit."""


class Channel:
    """One request/response exchange."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self.started = False
        self.complete = False
        self.disconnected = asyncio.Event()
        """Set when the client leaves, or when the emulator shuts down (`closing`)."""
        self.disconnected_at: float | None = None
        self.closing = False
        self.on_disconnect: Callable[[float], None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    # ---- request ---------------------------------------------------------------------------
    async def read_body(self) -> bytes:
        """The whole request body; flags a disconnect that happens while reading it."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._mark_disconnected()
                return b"".join(parts)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > _MAX_BODY:
                raise BodyTooLarge
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    def watch(self) -> None:
        """Start watching for the client's disconnect (call after `read_body`)."""
        if self._watcher is None and not self.disconnected.is_set():
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while not self.complete:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                if not self.complete:
                    self._mark_disconnected()
                return

    def _mark_disconnected(self) -> None:
        if self.disconnected_at is None:
            self.disconnected_at = time.time()
            if self.on_disconnect is not None:
                self.on_disconnect(self.disconnected_at)
        self.disconnected.set()

    def shut(self) -> None:
        """Server shutdown: wake every wait as if the client had left (call on the loop)."""
        self.closing = True
        self.disconnected.set()

    async def close(self) -> None:
        """Stop watching. Always call this when the exchange ends."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None

    @property
    def gone(self) -> bool:
        return self.disconnected.is_set()

    # ---- waiting ---------------------------------------------------------------------------
    async def pause(self, seconds: float) -> bool:
        """Wait `seconds` unless the client disconnects first; True if it did."""
        if self.gone:
            return True
        if seconds <= 0:
            await asyncio.sleep(0)
        elif seconds <= _SHORT_SLEEP_S:
            await asyncio.sleep(seconds)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.disconnected.wait(), seconds)
        return self.gone

    async def pause_until(self, deadline: float) -> bool:
        """`pause` until the `time.monotonic()` `deadline`."""
        return await self.pause(deadline - time.monotonic())

    async def paced[T](self, items: Sequence[T], interval: float) -> AsyncIterator[T]:
        """Yield `items` one every `interval` seconds from now; stop early if the client leaves
        (the caller checks `gone` after the loop)."""
        start = time.monotonic()
        for i, item in enumerate(items):
            if await self.pause_until(start + i * interval):
                return
            yield item

    # ---- response --------------------------------------------------------------------------
    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        if self.started:
            return
        self.started = True
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        await self._send({"type": "http.response.start", "status": status, "headers": raw})

    async def write(self, data: bytes) -> None:
        """Send part of the body, flushed at once (the response stays open)."""
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    def abort(self) -> None:
        """Break the response off: the caller returns without `end()`, and the server closes
        the connection mid-body (chunked encoding never terminated)."""
        _ABORTING.set(True)

    async def end(self, data: bytes = b"") -> None:
        """Send the last part of the body and complete the response."""
        self.complete = True
        await self._send({"type": "http.response.body", "body": data, "more_body": False})

    async def json(
        self, status: int, body: Any, headers: list[tuple[str, str]] | None = None
    ) -> None:
        """A complete JSON response (`content-type` added unless `headers` has one)."""
        payload = orjson.dumps(body)
        heads = list(headers or [])
        if not any(k.lower() == "content-type" for k, _ in heads):
            heads.insert(0, ("content-type", "application/json"))
        heads.append(("content-length", str(len(payload))))
        await self.start(status, heads)
        await self.end(payload)
