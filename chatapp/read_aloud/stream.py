"""One Read aloud's upstream request (`POST /audio/speech`), run in a task of its own.

The request's response only relays what this task puts on a queue. Django's ASGI handler
(5.0+) cancels the request's task when the browser goes away (`http.disconnect`: Stop drops the
audio's `src`, or the page closed), which lands in the relay, wherever it waits; the relay then
`stop`s this task, whose cancellation closes the upstream response (Numes: closing early cancels
the request), and the read aloud is written `cancelled` with the audio delivered so far. The record
is not written from the request's task because that task is being cancelled, and the outcome
must not depend on where the cancellation caught it.

A body that ends proves nothing on its own (Numes has no in-band error once audio starts: a
failure just ends the body early), so the read aloud is `completed` only when the generation record
says so; a body that broke off, or a record that says otherwise, is `incomplete`. Its cost comes
from the same record (`costing`), or stays `pending` for the sweep.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from django.conf import settings

from chatapp import records_thread
from chatapp.costs import reconcile, settling
from chatapp.costs.models import Generation
from chatapp.errors import ChatAppError
from chatapp.gateways.clients import shared_client
from chatapp.read_aloud.records import (
    COOL_DOWN,
    ReadAloudEnd,
    ReadAloudRefused,
    ReadAloudStart,
    beat,
    create_read_aloud,
    save_read_aloud,
    stopped_recently,
)
from chatapp.rendering.attachments import PLAYABLE_AUDIO_TYPES
from chatapp.streaming import sweep
from gateway_client.client import GenerationRecord
from gateway_client.errors import ErrorInfo, GatewayError

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = ["NotPlayable", "ReadAloud", "Seat", "running_pks", "start", "start_or_join"]

logger = logging.getLogger(__name__)

Status = Generation.Status

_running: dict[int, ReadAloud] = {}
_claims: dict[tuple[int, int], _Claim] = {}  # (user, answer) → its read aloud in this process


class NotPlayable(ChatAppError):
    """The gateway answered with audio in a type the page's player cannot take."""


@dataclass(frozen=True, slots=True)
class _Pumped:
    """How the upstream body ended: `ended` (to be confirmed by the record), or not."""

    status: Status | None  # None: the body ended, and only the record can say how
    error: ErrorInfo | None = None


class ReadAloud:
    def __init__(self, start: ReadAloudStart, audience: Audience | None = None) -> None:
        self.start = start
        self.pk = start.generation_pk
        self.client = shared_client(start.setup.config)
        self.audience = audience or Audience()
        self.audience.read_aloud = self
        self._arrived = asyncio.Condition()  # notified as audio arrives, and at its end
        self._ended = False
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
        `GatewayError` or `NotPlayable` that ended the read aloud before its first byte."""
        return await asyncio.shield(self._head)

    def stop(self) -> None:
        """Close the upstream request if it is still sending (idempotent)."""
        self._stop_asked = True
        if self._pumping and self._task is not None:
            self._task.cancel()

    def relay(self, seat: Seat) -> Relay:
        return Relay(self, seat)

    async def pieces(self, seat: Seat) -> AsyncIterator[bytes]:
        """The audio from its first byte, as it arrives: every request playing this read aloud
        gets all of it, however late it joined."""
        sent = 0
        try:
            while True:
                async with self._arrived:
                    while not self._ended and len(self._audio) == sent:
                        await self._arrived.wait()
                if len(self._audio) == sent:
                    return
                piece = bytes(self._audio[sent:])
                sent += len(piece)
                yield piece
        finally:
            seat.leave()  # the last to leave stops the read aloud (a no-op once its body ended)

    async def _announce(self) -> None:
        async with self._arrived:
            self._arrived.notify_all()

    async def run(self) -> None:
        _running[self.pk] = self
        beating = asyncio.get_running_loop().create_task(self._beat())
        try:
            pumped = await self._pump()
            await self._finish(pumped)
        except Exception:
            logger.exception("Recording read aloud %s failed", self.pk)
        finally:
            beating.cancel()
            _running.pop(self.pk, None)
            self.audience.closed()

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
                    await self._announce()
            return _Pumped(None)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # ours, by `stop`: the read aloud goes on to record itself
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
            self._ended = True
            await asyncio.shield(self._announce())
            self._fail_head(ChatAppError("The read aloud ended before any audio."))

    def _fail_head(self, exc: Exception) -> None:
        if not self._head.done():
            self._head.set_exception(exc)
            self._head.exception()  # retrieved: a read aloud nobody waits for logs no warning

    async def _finish(self, pumped: _Pumped) -> None:
        lookup = None
        if pumped.status is None:
            expected = bool(self._upstream_id)
            lookup = await reconcile.look_up(self.client, self._upstream_id, expected=expected)
            status, error = _confirmed(lookup.record, len(self._audio))
            end = self._end(status, error)
        else:  # written before any look-up, so that the page can say "stopped" (or why) at once
            end = self._end(pumped.status, pumped.error)
        final = await save_read_aloud(self.pk, end)
        await settling.settle(self.client, self.pk, self.start.user_pk, final, lookup=lookup)

    def _end(self, status: Status, error: ErrorInfo | None) -> ReadAloudEnd:
        return ReadAloudEnd(
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
                await records_thread.on_record_thread(
                    beat, self.pk, self._upstream_id, self._request_id
                )
            except Exception:  # a missed beat is retried in a second; the sweep waits 15
                logger.warning("Read aloud %s missed a heartbeat", self.pk, exc_info=True)


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
    """One response's content. `close` is Django's call (`response.close()`, from a thread,
    also after a disconnect): its request leaves the read aloud even if the relay was left
    suspended at a `yield`, where the handler's cancellation does not reach it."""

    def __init__(self, read_aloud: ReadAloud, seat: Seat) -> None:
        self._read_aloud = read_aloud
        self._seat = seat
        self._loop = asyncio.get_running_loop()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._read_aloud.pieces(self._seat)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._seat.leave)


class Audience:
    """The requests of this process playing one read aloud: it stops when the last one leaves (a
    read aloud that is stopped before it began sends nothing upstream)."""

    def __init__(self) -> None:
        self.seats = 0
        self.read_aloud: ReadAloud | None = None
        self.abandoned = False  # every request left: nobody may join what is being stopped
        self.claim: tuple[int, int] | None = None

    def seat(self) -> Seat:
        self.seats += 1
        return Seat(self)

    def _left(self) -> None:
        self.seats -= 1
        if self.seats == 0:
            self.abandoned = True
            if self.read_aloud is not None:
                self.read_aloud.stop()

    def closed(self) -> None:
        """The read aloud has ended: a request from now on plays the stored audio or starts anew."""
        key = self.claim
        if key is not None and (claim := _claims.get(key)) is not None and claim.audience is self:
            del _claims[key]


class Seat:
    """One request's place in an `Audience`; `leave` is idempotent."""

    def __init__(self, audience: Audience) -> None:
        self._audience: Audience | None = audience

    def leave(self) -> None:
        if self._audience is not None:
            audience, self._audience = self._audience, None
            audience._left()


@dataclass(slots=True)
class _Claim:
    audience: Audience
    started: asyncio.Future[ReadAloud]


def start(begun: ReadAloudStart, audience: Audience | None = None) -> ReadAloud:
    """Start reading `begun` aloud on the running loop."""
    read_aloud = ReadAloud(begun, audience)
    if read_aloud.audience.abandoned:
        read_aloud.stop()  # every request left while its row was made: it records itself cancelled
    task = asyncio.get_running_loop().create_task(read_aloud.run(), context=contextvars.Context())
    read_aloud._task = task
    return read_aloud


async def start_or_join(user: User, message_pk: int) -> tuple[ReadAloud, Seat]:
    """The user's answer `message_pk` being read aloud, and this request's seat in its audience:
    the read aloud another request of this process started, if one runs (so that 30 requests at
    once make one read aloud, one upstream request, one bill), else a new one (`create_read_aloud`,
    which refuses while one runs in another process). Raises what `create_read_aloud` raises, to
    every request that joined."""
    key = (user.pk, message_pk)
    claim = _claims.get(key)
    if claim is not None and claim.audience.abandoned:
        raise ReadAloudRefused(stopped_recently(COOL_DOWN))
    if claim is None:
        audience = Audience()
        audience.claim = key
        started = asyncio.ensure_future(_begin(user, message_pk, audience))
        claim = _claims[key] = _Claim(audience, started)
        started.add_done_callback(lambda done: _forget_refused(key, claim, done))
    seat = claim.audience.seat()
    try:
        read_aloud = await asyncio.shield(claim.started)
    except BaseException:
        seat.leave()
        raise
    return read_aloud, seat


async def _begin(user: User, message_pk: int, audience: Audience) -> ReadAloud:
    begun = await records_thread.on_record_thread(create_read_aloud, user, message_pk)
    return start(begun, audience)


def _forget_refused(
    key: tuple[int, int], claim: _Claim, started: asyncio.Future[ReadAloud]
) -> None:
    if (started.cancelled() or started.exception() is not None) and _claims.get(key) is claim:
        del _claims[key]


def running_pks() -> set[int]:
    """Read alouds running in this process (the sweep leaves them alone)."""
    return set(_running)


sweep.also_running(running_pks)
