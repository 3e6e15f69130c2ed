"""The records thread: one thread, one database connection, its work taken by urgency.

New turns, final states, settled costs and titles are written here, on one thread keeping one
connection (`on_record_thread` and its kin): they never race each other for SQLite's one write
lock. A plain executor took them first come, first served, so when 200 answers ended together,
the sends made meanwhile waited behind 200 final writes and 200 title generations, and their
users behind them for their first token (seconds). Here each call has a `Priority`: what a user
is waiting for (a send, a Stop) first, then the records of answers under way, then what can wait
(titles), each level in the order it came.

It stands at the root, below every package, since what writes a record is found at many layers
(the turn's start and final state in `streaming`, a settled cost in `costs`, a read aloud's rows).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from enum import IntEnum
from typing import Any

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connection

__all__ = [
    "Priority",
    "RecordsThread",
    "on_final_thread",
    "on_record_thread",
    "on_record_thread_from_view",
    "on_record_thread_when_idle",
    "records",
]

logger = logging.getLogger(__name__)

# How long a final write keeps retrying while the database is unreachable.
RETRY_FOR = 30.0


class Priority(IntEnum):
    """Lower runs first."""

    USER_WAITING = 0  # a view's turn, a Stop: a person is looking at the page
    ANSWER = 1  # a running answer's records: its final state, its cost, its limits
    BACKGROUND = 2  # titles: nobody waits for them, and a crowd of them must not delay the rest


type _Item = tuple[int, int, Callable[[], Any], Future[Any]]


class RecordsThread:
    """One worker thread running submitted calls by priority (FIFO within one).

    Built on a one-thread executor, so that the thread is joined at exit as the executor's are
    (a final write under way is finished, not cut): each call submitted queues one turn of the
    thread, which runs whichever call is then the most urgent.
    """

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._queue: list[_Item] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    def submit[R](self, priority: Priority, call: Callable[[], R]) -> Future[R]:
        future: Future[R] = Future()
        with self._lock:
            heapq.heappush(self._queue, (priority, next(self._order), call, future))
        self._executor.submit(self._run_next)
        return future

    def queued(self) -> int:
        """Calls waiting to start (not the one running)."""
        with self._lock:
            return len(self._queue)

    def _run_next(self) -> None:
        with self._lock:
            _, _, call, future = heapq.heappop(self._queue)
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = call()
        except BaseException as exc:  # the caller's to see, as an executor hands it over
            future.set_exception(exc)
        else:
            future.set_result(result)


# New turns and final states are written on one thread of their own, keeping one connection: they
# never queue behind the writer's batches, and they do not race each other for SQLite's one write
# lock, whose losers wait in the busy handler's coarse sleeps (a burst of 50 new chats took 3 s to
# insert from 50 request threads, ~60 ms a turn, and ~2 ms a turn from this one). They are taken
# by urgency: a send waits behind no final write, and nothing behind a title.
records = RecordsThread("chat-records")


async def _on_records[R](priority: Priority, call: Callable[[], R]) -> R:
    return await asyncio.wrap_future(records.submit(priority, call))


async def on_record_thread[**P, R](
    function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    """`function(*args, **kwargs)` on the records thread, for a running answer (no retry)."""
    return await _on_records(Priority.ANSWER, functools.partial(function, *args, **kwargs))


async def on_record_thread_when_idle[**P, R](
    function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    """`on_record_thread` for what nobody waits for (a title): after everything else queued."""
    return await _on_records(Priority.BACKGROUND, functools.partial(function, *args, **kwargs))


def _give_back_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()  # with a pool: back to it, not closed


async def on_record_thread_from_view[**P, R](
    function: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> R:
    """`on_record_thread` for a view: first its request's thread gives its database connection
    back, when connections come from a pool (PostgreSQL). Each request reads its session, user
    and options on its own thread, which keeps the connection it borrowed until the request
    ends; a burst of requests waiting here with one each emptied the pool (10 sends, a pool of
    10), the records thread got none, and every send hung until the pool's timeout."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool"):
        await sync_to_async(_give_back_connection)()  # on the request's thread
    # In the request's context, so that what it read once (`request_memo`) is not read again.
    call = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    return await _on_records(Priority.USER_WAITING, call)


def on_final_thread[**P, R](function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run `function` on the records thread, retrying while the database is unreachable
    (a restart, a failover): the final state of an answer must not be lost to a blip."""

    def attempt(*args: P.args, **kwargs: P.kwargs) -> R:
        deadline = time.monotonic() + RETRY_FOR
        delay = 0.1
        while True:
            try:
                return function(*args, **kwargs)
            except (OperationalError, InterfaceError):
                connection.close()  # reopened by the next attempt
                if time.monotonic() + delay > deadline:
                    raise
                logger.warning("The database refused %s; retrying", function.__name__)
                time.sleep(delay)  # on this thread only, never on the event loop
                delay = min(delay * 2, 2.0)

    @functools.wraps(function)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return await on_record_thread(attempt, *args, **kwargs)

    return run
