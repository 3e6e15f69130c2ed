"""One Read aloud's upstream request (`POST /audio/speech`), run in a task of its own.

The request's response only relays what this task puts on a queue. Django's ASGI handler
(5.0+) cancels the request's task when the browser goes away (`http.disconnect`: Stop drops the
audio's `src`, or the page closed), which lands in the relay, wherever it waits; the relay then
`stop`s this task, whose cancellation closes the upstream response (Numes: closing early cancels
the request), and the reading is written `cancelled` with the audio delivered so far. The record
is not written from the request's task because that task is being cancelled, and the outcome
must not depend on where the cancellation caught it.

A body that ends proves nothing on its own (Numes has no in-band error once audio starts: a
failure just ends the body early), so the reading is `completed` only when the generation record
says so; a body that broke off, or a record that says otherwise, is `incomplete`. Its cost comes
from the same record (`costing`), or stays `pending` for the sweep.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from django.conf import settings

from gateway_client.client import GenerationRecord
from gateway_client.errors import ErrorInfo, GatewayError

from . import persistence, reconcile
from .attachments import PLAYABLE_AUDIO_TYPES
from .errors import ChatAppError
from .gateway import shared_client
from .models import Generation
from .reading_records import ReadingEnd, ReadingStart, beat

__all__ = ["NotPlayable", "Reading", "running_pks", "start"]

logger = logging.getLogger(__name__)

Status = Generation.Status

_running: dict[int, Reading] = {}


class NotPlayable(ChatAppError):
    """The gateway answered with audio in a type the page's player cannot take."""


@dataclass(frozen=True, slots=True)
class _Pumped:
    """How the upstream body ended: `ended` (to be confirmed by the record), or not."""

    status: Status | None  # None: the body ended, and only the record can say how
    error: ErrorInfo | None = None


class Reading:
    def __init__(self, start: ReadingStart) -> None:
        self.start = start
        self.pk = start.generation_pk
        self.client = shared_client(start.setup.config)
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._head: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._audio = bytearray()
        self._media_type = ""
        self._upstream_id = ""
        self._request_id = ""
        self._ttft_ms: int | None = None
        self._pumping = False
        self._stop_asked = False
        self._task: asyncio.Task[None] | None = None

    async def opened(self) -> str:
        """The audio's media type once the upstream answered with audio; raises the
        `GatewayError` or `NotPlayable` that ended the reading before its first byte."""
        return await asyncio.shield(self._head)

    def stop(self) -> None:
        """Close the upstream request if it is still sending (idempotent)."""
        self._stop_asked = True
        if self._pumping and self._task is not None:
            self._task.cancel()

    def relay(self) -> Relay:
        return Relay(self)

    async def pieces(self) -> AsyncIterator[bytes]:
        try:
            while (piece := await self._queue.get()) is not None:
                yield piece
        finally:
            self.stop()  # no-op once the upstream body has ended

    async def run(self) -> None:
        _running[self.pk] = self
        beating = asyncio.get_running_loop().create_task(self._beat())
        try:
            pumped = await self._pump()
            await self._finish(pumped)
        except Exception:
            logger.exception("Recording reading %s failed", self.pk)
        finally:
            beating.cancel()
            _running.pop(self.pk, None)

    async def _pump(self) -> _Pumped:
        self._pumping = True  # from here a `stop` cancels this task, which the code below ends
        loop = asyncio.get_running_loop()
        began = loop.time()
        setup = self.start.setup
        try:
            if self._stop_asked:  # the browser left before the task began
                raise asyncio.CancelledError
            async with self.client.stream_speech(
                model=setup.model, input=self.start.text, voice=setup.voice or None
            ) as stream:
                self._upstream_id = stream.generation_id or ""
                if stream.response is not None:
                    self._request_id = stream.response.headers.get("x-request-id", "")
                self._media_type = stream.media_type or ""
                if self._media_type not in PLAYABLE_AUDIO_TYPES:
                    raise NotPlayable(
                        f"The gateway sent {self._media_type}, which this page cannot play."
                    )
                self._head.set_result(self._media_type)
                async for piece in stream:
                    if self._ttft_ms is None:
                        self._ttft_ms = round((loop.time() - began) * 1000)
                    self._audio += piece
                    self._queue.put_nowait(piece)
            return _Pumped(None)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # ours, by `stop`: the reading goes on to record itself
            return _Pumped(Status.CANCELLED)
        except NotPlayable as exc:
            self._fail_head(exc)
            return _Pumped(Status.FAILED, ErrorInfo(None, None, "not_playable", str(exc)))
        except GatewayError as exc:
            self._fail_head(exc)
            if not self._audio:
                return _Pumped(Status.FAILED, exc.info)
            said = f"The audio broke off after {len(self._audio)} bytes: {exc.info.message}"
            return _Pumped(Status.INCOMPLETE, replace(exc.info, message=said))
        finally:
            self._pumping = False
            self._queue.put_nowait(None)
            self._fail_head(ChatAppError("The reading ended before any audio."))

    def _fail_head(self, exc: Exception) -> None:
        if not self._head.done():
            self._head.set_exception(exc)
            self._head.exception()  # retrieved: a reading nobody waits for logs no warning

    async def _finish(self, pumped: _Pumped) -> None:
        expected = bool(self._upstream_id)
        if pumped.status is None:
            lookup = await reconcile.look_up(self.client, self._upstream_id, expected=expected)
            status, error = _confirmed(lookup.record, len(self._audio))
            final = await persistence.save_reading(self.pk, self._end(status, error))
        else:
            # Written first, so that the page can say "stopped" (or why it failed) at once.
            final = await persistence.save_reading(self.pk, self._end(pumped.status, pumped.error))
            if not final.cost_pending:
                return
            lookup = await reconcile.look_up(
                self.client, final.upstream_id, expected=final.record_expected
            )
        if final.cost_pending:
            await persistence.settle_cost(self.pk, lookup)

    def _end(self, status: Status, error: ErrorInfo | None) -> ReadingEnd:
        return ReadingEnd(
            status=status,
            media_type=self._media_type,
            audio=bytes(self._audio),
            upstream_id=self._upstream_id,
            request_id=self._request_id,
            ttft_ms=self._ttft_ms,
            error=error,
        )

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(settings.CHAT_FLUSH_INTERVAL)
            try:
                await persistence.on_record_thread(
                    beat, self.pk, self._upstream_id, self._request_id
                )
            except Exception:  # a missed beat is retried in a second; the sweep waits 15
                logger.warning("Reading %s missed a heartbeat", self.pk, exc_info=True)


def _confirmed(record: GenerationRecord | None, received: int) -> tuple[Status, ErrorInfo | None]:
    """A whole body's status by the generation record: completed only when it says so."""
    if record is not None and record.outcome == "completed":
        return Status.COMPLETED, None
    if record is None or record.outcome == "in_progress":
        said = "the gateway's generation record could not confirm it was whole"
    else:
        said = f"the gateway's generation record says {record.outcome}"
    message = f"The audio ended after {received} bytes, but {said}."
    return Status.INCOMPLETE, ErrorInfo(None, None, "unconfirmed", message)


class Relay:
    """The response's content. `close` is Django's call (`response.close()`, from a thread,
    also after a disconnect): it stops the reading even if the relay was left suspended at a
    `yield`, where the handler's cancellation does not reach it."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading
        self._loop = asyncio.get_running_loop()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._reading.pieces()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._reading.stop)


def start(begun: ReadingStart) -> Reading:
    """Start reading `begun` aloud on the running loop."""
    reading = Reading(begun)
    task = asyncio.get_running_loop().create_task(reading.run(), context=contextvars.Context())
    reading._task = task
    return reading


def running_pks() -> set[int]:
    """Readings running in this process (the sweep leaves them alone)."""
    return set(_running)
