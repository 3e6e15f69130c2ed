"""The records thread: one thread, one database connection, its work taken by urgency.

New turns, final states, settled costs and titles are written here, on one thread keeping one
connection (`persistence.on_record_thread`): they never race each other for SQLite's one write
lock. A plain executor took them first come, first served, so when 200 answers ended together,
the sends made meanwhile waited behind 200 final writes and 200 title generations, and their
users behind them for their first token (seconds). Here each call has a `Priority`: what a user
is waiting for (a send, a Stop) first, then the records of answers under way, then what can wait
(titles), each level in the order it came.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from enum import IntEnum
from typing import Any

__all__ = ["Priority", "RecordsThread"]


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
