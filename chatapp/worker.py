"""Runs one generation as an asyncio task on the server's loop, independent of any websocket.

Three tasks cooperate: the stream (its `Accumulator` folds every event into the `Completion` the
final write reads; the visible ones also queue in a `LiveState`), a ticker (every
~50 ms the pending part goes out as one numbered delta to the conversation's group; every second
the sent part, its `seq` and a heartbeat go to the database) and a listener on the worker's own
channel (cancel and snapshot requests, so Stop and re-attach work from any process). Cancel closes
the upstream connection by cancelling the stream task, which leaves `stream_chat`'s block: that
is the only cancel the gateways know. The final state is written in one transaction; a cost the
stream did not report is then reconciled from the gateway's generation record.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Awaitable

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings

from gateway_client import EventStream, GatewayClient
from gateway_client.errors import (
    ConnectError,
    ErrorInfo,
    GatewayError,
    GatewayTimeout,
    IncompleteStream,
    StatusError,
)

from . import persistence, ws_protocol
from .gateway import GatewayConfig, client, gateway_config
from .jobs import Job, Outcome, Status
from .live_state import LiveState
from .persistence import FinalState

logger = logging.getLogger(__name__)

RECONCILE_TIMEOUT = 30.0

_running: dict[int, GenerationWorker] = {}
_tasks: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones

INTERNAL_ERROR = ErrorInfo(
    None,
    "internal_error",
    "internal_error",
    "The server failed while reading the answer; what arrived is kept.",
)


async def _finish_despite_cancel(send: Awaitable[None]) -> None:
    """Await `send` to its end even when the caller is cancelled meanwhile, then re-raise.

    A delta taken from the `LiveState` exists nowhere else: a network layer's send (Redis) cut
    short when the stream ends and cancels the ticker would lose it while `done` counts its seq.
    """
    task = asyncio.ensure_future(send)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            logger.warning("A delta was lost: %r", task.exception())
        raise


class GenerationWorker:
    def __init__(
        self,
        job: Job,
        *,
        config: GatewayConfig | None = None,
        layer: BaseChannelLayer | None = None,
    ) -> None:
        self.job = job
        self.config = config or gateway_config()
        self.layer = layer or get_channel_layer()
        self.group = ws_protocol.group_name(job.conversation_pk)
        self.state = LiveState()
        self.request_id: str | None = None
        self._stream: EventStream | None = None
        self._cancel = asyncio.Event()
        self._ticks = 0

    # --- Lifecycle --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Stream to a terminal state, persist it, tell the browsers, then reconcile the cost."""
        async with client(self.config) as gw:
            listener = asyncio.create_task(self._listen())
            try:
                outcome = await self._stream_until_done_or_cancelled(gw)
                final = await self._finish(outcome)
            finally:
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)
            if final.cost_pending:
                await self._reconcile(gw, final)

    async def _stream_until_done_or_cancelled(self, gw: GatewayClient) -> Outcome:
        ticker = asyncio.create_task(self._tick())
        streamer = asyncio.create_task(self._stream_answer(gw))
        cancelled = asyncio.create_task(self._cancel.wait())
        try:
            await asyncio.wait({streamer, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            if streamer.done():
                return streamer.result()
            streamer.cancel()  # leaves `stream_chat`'s block: closes the upstream connection
            await asyncio.gather(streamer, return_exceptions=True)
            logger.info("Generation %s cancelled", self.job.generation_pk)
            return Outcome(Status.CANCELLED)
        finally:
            for task in (streamer, ticker, cancelled):
                task.cancel()
            await asyncio.gather(streamer, ticker, cancelled, return_exceptions=True)

    async def _stream_answer(self, gw: GatewayClient) -> Outcome:
        """Never raises: every failure becomes an `Outcome` the user can read."""
        job = self.job
        try:
            async with gw.stream_chat(model=job.model, messages=job.messages) as stream:
                self._stream = stream
                self.request_id = stream.request_id
                async for event in stream:
                    self.state.apply(event)
                return Outcome(Status.COMPLETED, completion=stream.completion)
        except StatusError as exc:
            logger.warning("Generation %s refused: %s", job.generation_pk, exc)
            return Outcome(Status.FAILED, exc.info, retry_after=exc.retry_after)
        except (IncompleteStream, ConnectError) as exc:
            started = self._stream is not None
            logger.warning("Generation %s ended early: %s", job.generation_pk, exc)
            status = Status.INCOMPLETE if started else Status.FAILED
            return Outcome(status, exc.info, completion=exc.completion)
        except GatewayTimeout as exc:
            logger.warning("Generation %s timed out (%s): %s", job.generation_pk, exc.phase, exc)
            message = ws_protocol.timeout_message(exc.phase, exc.message)
            info = dataclasses.replace(exc.info, message=message)
            return Outcome(Status.FAILED, info, completion=exc.completion)
        except GatewayError as exc:
            logger.warning("Generation %s failed: %s", job.generation_pk, exc)
            return Outcome(Status.FAILED, exc.info, completion=exc.completion)
        except Exception:
            logger.exception("Generation %s crashed", job.generation_pk)
            return Outcome(Status.FAILED, INTERNAL_ERROR)

    # --- Ticker and listener ----------------------------------------------------------------------

    async def _tick(self) -> None:
        interval = settings.CHAT_DELTA_INTERVAL
        flush_every = max(1, round(settings.CHAT_FLUSH_INTERVAL / interval))
        flushed_output = False
        while True:
            await asyncio.sleep(interval)
            try:
                await self._send_delta()
                self._ticks += 1
                # The first output is written at once, so a page loaded in the first second
                # already shows it; then once a second.
                first_output = self.state.seq > 0 and not flushed_output
                if first_output or self._ticks % flush_every == 0:
                    flushed_output = self.state.seq > 0
                    await persistence.flush_partial(
                        self.job.generation_pk, self.state, self._upstream_id(), self._ttft_ms()
                    )
            except asyncio.CancelledError:
                raise
            except Exception:  # a hiccup in the layer or database must not stop the stream
                logger.exception("Generation %s: flush failed", self.job.generation_pk)

    async def _send_delta(self) -> None:
        delta = self.state.take_delta()
        if delta is not None:
            message = ws_protocol.group_message(ws_protocol.delta(self.job.generation_pk, delta))
            await _finish_despite_cancel(self.layer.group_send(self.group, message))

    async def _listen(self) -> None:
        while True:
            message = await self.layer.receive(self.job.owner_channel)
            match message.get("type"):
                case ws_protocol.CANCEL:
                    self._cancel.set()
                case ws_protocol.SNAPSHOT_REQUEST:
                    reply_to = message.get("reply_to")
                    if reply_to:
                        snapshot = ws_protocol.snapshot(
                            self.job.generation_pk, self.state.snapshot()
                        )
                        await self.layer.send(reply_to, ws_protocol.group_message(snapshot))

    # --- Finishing --------------------------------------------------------------------------------

    def _upstream_id(self) -> str | None:
        return self._stream.generation_id if self._stream is not None else None

    def _ttft_ms(self) -> int | None:
        seconds = self._stream.time_to_first_token if self._stream is not None else None
        return None if seconds is None else round(seconds * 1000)

    async def _finish(self, outcome: Outcome) -> FinalState:
        await self._send_delta()  # everything received reaches the browsers before `done`
        if self._stream is not None:  # on cancel and crashes too: whatever arrived counts
            self.request_id = self.request_id or self._stream.request_id
            if outcome.completion is None:
                outcome = dataclasses.replace(outcome, completion=self._stream.completion)
        final = await persistence.save_final(
            self.job.generation_pk, self.state, outcome, self._ttft_ms(), self.request_id
        )
        await self.layer.group_send(
            self.group,
            ws_protocol.group_message(
                ws_protocol.done(self.job.generation_pk, self.state.seq, outcome.status)
            ),
        )
        return final

    async def _reconcile(self, gw: GatewayClient, final: FinalState) -> None:
        upstream_id = final.upstream_id
        record = None
        # Only Numes documents `GET /generation`; elsewhere the stream was the only report.
        dialect = self._stream.dialect if self._stream is not None else gw.dialect
        if upstream_id and dialect in (None, "numes"):
            try:
                async with asyncio.timeout(RECONCILE_TIMEOUT):
                    record = await gw.get_generation(upstream_id)
            except (GatewayError, TimeoutError) as exc:
                logger.info("No generation record for %s: %s", upstream_id, exc)
            except Exception:
                logger.exception("Reconciling %s failed", upstream_id)
        changed = await persistence.save_reconciled(self.job.generation_pk, record)
        if changed:
            await self.layer.group_send(
                self.group, ws_protocol.group_message(ws_protocol.updated(self.job.generation_pk))
            )


# --- Process-local registry -----------------------------------------------------------------------


def running_ids() -> set[int]:
    return set(_running)


def start(job: Job, *, config: GatewayConfig | None = None) -> asyncio.Task[None]:
    """Run `job` on the current loop, detached from the request that started it.

    An empty context keeps the task out of the request's thread-sensitive executor (which Django
    shuts down when the response is sent); its database calls use asgiref's shared thread.
    """
    worker = GenerationWorker(job, config=config)
    _running[job.generation_pk] = worker
    task = asyncio.get_running_loop().create_task(worker.run(), context=contextvars.Context())

    def _done(task: asyncio.Task[None]) -> None:
        _running.pop(job.generation_pk, None)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Generation %s worker died", job.generation_pk, exc_info=task.exception())

    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    task.add_done_callback(_done)
    return task


async def new_owner_channel() -> str:
    """A process-local channel, named like the consumers' ones on purpose: channels_redis reads
    all of a process's channels that share a prefix through one Redis list, one reader at a time,
    so a second prefix would let the worker's listener and the consumers starve each other."""
    return await get_channel_layer().new_channel()
