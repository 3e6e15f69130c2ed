"""The process's one ticker and control channel, serving every running generation together.

A sleeping loop per generation (a wake-up, a send and every second a transaction each) made the
server's cost grow with each stream until the loops starved one another. Here one task per event
loop ticks every `CHAT_DELTA_INTERVAL`: each running generation whose pending text is ready (see
`LiveState.ready`) gives one delta, the deltas of one conversation go out as one frame
(`frames.py`), and once per `CHAT_FLUSH_INTERVAL` all of them are handed to the writer as one
batch (`writer.py`). A tick that comes late finds more text waiting: it sends more text, never
more messages.

One channel per process receives the control messages for all its generations (Stop, and
snapshot requests from a socket in any process), so the worker of a generation needs no listener
of its own. Its name is what `Generation.owner_channel` records.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from channels.exceptions import ChannelFull
from django.conf import settings

from chatapp.conversations.jobs import Job
from chatapp.messaging import layer_errors, socket_messages
from chatapp.streaming import writer
from chatapp.streaming.frames import TickFrames
from chatapp.streaming.live_state import LiveState

logger = logging.getLogger(__name__)

_tickers: dict[asyncio.AbstractEventLoop, Ticker] = {}
EARLY_CANCEL_FOR = 60.0  # seconds a Stop for a worker not yet added is kept for it


class TickedWorker(Protocol):
    """What the ticker asks of a running generation's worker (`worker.GenerationWorker`, which
    imports this module: the ticker names the worker by this protocol, not by its class)."""

    job: Job
    state: LiveState
    flushed_seq: int
    group: str  # its conversation's
    sending: asyncio.Lock  # held while one of its deltas is on its way (seq order)

    def cancel(self) -> None: ...

    def check_spend(self) -> None: ...

    def take_delta(self) -> list[list[object]]: ...

    async def send_snapshot(self, reply_to: str) -> None: ...

    def partial_row(self) -> writer.PartialRow: ...


class Ticker:
    def __init__(self, channel: str, layer: socket_messages.ChannelLayer) -> None:
        self.channel = channel
        self.layer = layer
        self._send_now = socket_messages.immediate_group_send(layer)
        self.workers: dict[int, TickedWorker] = {}
        self._batch: asyncio.Future[bool] | None = None
        # Stops that came for a generation of this process before its worker was added (a
        # tool round's next generation is on record a moment before it runs): key -> when.
        self._early_cancels: dict[int, float] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._removed = asyncio.Event()  # set as a worker leaves (`until_at_most`)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        context = contextvars.Context()  # outside any request's thread-sensitive executor
        self._tasks = [
            loop.create_task(self._tick_forever(), context=context),
            loop.create_task(self._listen_forever(), context=context),
        ]

    def add(self, worker: TickedWorker) -> None:
        self.workers[worker.job.generation_pk] = worker
        if self._early_cancels.pop(worker.job.generation_pk, None) is not None:
            worker.cancel()

    def remove(self, worker: TickedWorker) -> None:
        self.workers.pop(worker.job.generation_pk, None)
        self._removed.set()

    async def until_at_most(self, count: int) -> None:
        """Return once at most `count` generations run in this process."""
        while len(self.workers) > count:
            self._removed.clear()
            await self._removed.wait()

    # --- Deltas and batches -----------------------------------------------------------------------

    async def _tick_forever(self) -> None:
        loop = asyncio.get_running_loop()
        interval = settings.CHAT_DELTA_INTERVAL
        next_flush = loop.time() + settings.CHAT_FLUSH_INTERVAL
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            await self.send_deltas(now)
            # A batch still out defers the next one to a later tick, not to the next interval.
            if now >= next_flush and self._flush():
                next_flush = now + settings.CHAT_FLUSH_INTERVAL

    async def send_deltas(self, now: float) -> None:
        """Every ready generation's delta, one frame per conversation. A worker whose own send
        is under way (its first output, a tool run, its last delta) gives its delta next tick."""
        frames = TickFrames()
        held: list[asyncio.Lock] = []
        try:
            for worker in list(self.workers.values()):
                try:
                    worker.check_spend()
                    if not worker.state.ready(now) or worker.sending.locked():
                        continue
                    await worker.sending.acquire()  # free: taken without yielding the loop
                    held.append(worker.sending)
                    for delta in worker.take_delta():
                        frames.add(worker.group, delta)
                except Exception:  # one answer's failure must not stop the other streams
                    logger.exception("Generation %s: a delta failed", worker.job.generation_pk)
            for group, message in frames.messages():
                try:
                    await self.send(group, message)
                except Exception:
                    logger.exception("Deltas to %s failed", group)
        finally:
            for lock in held:  # after the sends: a snapshot waits until its deltas have left
                lock.release()

    async def send(self, group: str, message: socket_messages.ForwardMessage) -> bool:
        """Deltas to `group`'s sockets, the ticker's and a worker's own (`send_delta`): False
        when the layer is down and they are lost."""
        if self._send_now is not None:  # in process: nothing to wait for, nothing to cut short
            self._send_now(group, message)
            return True
        try:
            await _finish_despite_cancel(self.layer.group_send(group, message))
        except layer_errors.LAYER_DOWN as exc:
            # Numbered: a page sees the gap at the next delta and asks for a snapshot.
            logger.warning("Deltas to %s lost (%s)", group, exc)
            return False
        return True

    def _flush(self) -> bool:
        """Hand every running generation's state to the writer, unless a batch is still out;
        whether a batch was started (or there was nothing to write)."""
        if self._batch is not None and not self._batch.done():
            return False
        workers = list(self.workers.values())
        rows = [worker.partial_row() for worker in workers]
        if not rows:
            return True
        loop = asyncio.get_running_loop()
        batch = loop.run_in_executor(writer.executor, writer.write_partials, rows)
        self._batch = batch

        def written(done: asyncio.Future[bool]) -> None:
            if not done.cancelled() and done.exception() is None and done.result():
                for worker, row in zip(workers, rows, strict=True):
                    worker.flushed_seq = max(worker.flushed_seq, row.seq)

        batch.add_done_callback(written)
        return True

    # --- Control messages -------------------------------------------------------------------------

    async def _listen_forever(self) -> None:
        pause = 0.0  # grows while the layer is down: a failing receive returns at once
        while True:
            try:
                message = await self.layer.receive(self.channel)
                await self._control(message)
                pause = 0.0
            except asyncio.CancelledError:
                raise
            except ChannelFull:  # the asking socket is behind: it asks again at its next gap
                logger.info("A snapshot was not sent: the socket's channel is full")
            except layer_errors.LAYER_DOWN as exc:
                if not pause:
                    logger.warning("The channel layer is down; control messages wait (%s)", exc)
                pause = min(pause * 2 or 0.05, 1.0)
                await asyncio.sleep(pause)
            except Exception:
                logger.exception("A control message failed")

    async def _control(self, message: dict[str, Any]) -> None:
        worker = self.workers.get(message.get("g", -1))
        match message.get("type"):
            case socket_messages.CANCEL:
                if worker is not None:
                    worker.cancel()
                elif isinstance(message.get("g"), int):
                    self._remember_cancel(message["g"])
            case socket_messages.SNAPSHOT_REQUEST:
                reply_to = message.get("reply_to")
                if worker is not None and reply_to:
                    await worker.send_snapshot(reply_to)

    def _remember_cancel(self, generation_pk: int) -> None:
        now = asyncio.get_running_loop().time()
        for pk, when in list(self._early_cancels.items()):
            if now - when > EARLY_CANCEL_FOR:
                del self._early_cancels[pk]
        self._early_cancels[generation_pk] = now


async def _finish_despite_cancel(send: Awaitable[None]) -> None:
    """Await `send` to its end even when the caller is cancelled meanwhile, then re-raise.

    A delta taken from the `LiveState` exists nowhere else: a network layer's send (Redis) cut
    short by a cancel would lose it while `done` counts its seq.
    """
    task = asyncio.ensure_future(send)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            logger.warning("A delta was lost: %r", task.exception())
        raise


async def ticker() -> Ticker:
    """This loop's ticker, started on first use."""
    loop = asyncio.get_running_loop()
    found = _tickers.get(loop)
    if found is None:
        for old in [old for old in _tickers if old.is_closed()]:
            del _tickers[old]
        layer = socket_messages.channel_layer()
        # Named like the consumers' channels on purpose: channels_redis reads all of a process's
        # channels that share a prefix through one Redis list, one reader at a time, so a second
        # prefix would let the control listener and the consumers starve each other.
        channel = await layer.new_channel()
        found = _tickers.get(loop)  # another caller may have won the race meanwhile
        if found is None:
            layer_errors.quiet_background_failures(loop)
            found = _tickers[loop] = Ticker(channel, layer)
            found.start()
    return found


def current_ticker() -> Ticker:
    """This loop's ticker, which `ticker()` must have started."""
    found = _tickers.get(asyncio.get_running_loop())
    if found is None:
        raise RuntimeError("no ticker on this loop: await ticker() (or owner_channel()) first")
    return found
