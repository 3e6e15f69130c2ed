"""Markdown rendering off the event loop, in worker processes that can be killed at a deadline.

Model text decides how long markdown-it, its plugins and Pygments take, and a lexer's regex can
backtrack for minutes; in the server's process that would hold the GIL, and with it every request
(a thread cannot be stopped, and its regex does not let go of the GIL). So every render runs here:
in a small pool of *processes* (`CHAT_RENDER_WORKERS`), each job under a hard deadline
(`CHAT_RENDER_DEADLINE` seconds). A job that overruns has its process killed and replaced; one
whose process dies likewise. Either way the caller gets `Failure` and shows the text as escaped
plain text, marked (`markdown.plain_text_html`, through the one sanitizer).

- `run_sync` blocks the calling thread (a view's, a template's), never the loop; `run` is the same
  for the loop: a thread of the pool's own waits on the process's pipe, which holds no GIL.
- Bounded: at most `CHAT_RENDER_WORKERS` jobs run and `CHAT_RENDER_QUEUE` wait; a job that finds
  the queue full, or waits longer than a deadline for a process, fails at once as `"busy"`.
- Lazy and cheap: nothing starts until an answer starts (`warm`, from `LiveState.for_answer`)
  or a job needs a process and none is idle; a process serves job after job. Each is a fresh
  interpreter (`python -c`, over a socket pair), not a fork: the server's loop, threads and
  sockets are not copied into it, and unlike multiprocessing's `spawn` it does not run the
  server's main module again.
- A process exits when its pipe closes (the server died); `shutdown` (at exit) kills the rest.
- Processes run at a lower priority (`NICENESS`): on a busy machine requests are served first;
  and within `MEMORY_LIMIT`, so a render that would take the machine's memory fails instead.

A job is a module-level function and its arguments, pickled by reference: the processes import
`chatapp.rendering.pool_jobs`, whose import warms the renderer, so a new process is ready for the
first job.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

from django.conf import settings

logger = logging.getLogger(__name__)

__all__ = ["Failure", "RenderPool", "Runner", "pool", "run", "run_sync", "shutdown", "warm"]

type FailureKind = Literal["deadline", "crashed", "busy"]
# What runs a render job: `run`, or a test's stand-in that runs it in place.
type Runner = Callable[..., Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Failure:
    """A job that gave no result: it ran past the deadline, its process died (or it raised), or
    no process was free in time."""

    kind: FailureKind
    detail: str = ""


_READY = "ready"
NICENESS = 10  # renders are background work: a busy machine serves requests first
MEMORY_LIMIT = 1 << 30  # bytes of address space a process may map: a job past it fails
STARTUP_TIMEOUT = 60.0  # seconds a new process may take to import the renderer (not a job's time)


@dataclass(slots=True, eq=False)  # compared by identity: a set holds the running ones
class _Process:
    process: subprocess.Popen[bytes]
    conn: Connection
    jobs: int = 0


def serve(fd: int) -> None:
    """A pool process (`python -c`): run jobs from the socket `fd` until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's; it ends us
    os.nice(NICENESS)  # the server's own process comes first for the CPU
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    conn = Connection(fd)
    import chatapp.rendering.pool_jobs  # noqa: F401  (the renderer, imported before the first job)

    conn.send(_READY)
    while True:
        try:
            function, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[bool, object] = (True, function(*args))
        except Exception as exc:  # the job's bug: the caller falls back, the process serves on
            reply = (False, f"{type(exc).__name__}: {exc}")
        conn.send(reply)


class RenderPool:
    def __init__(self, workers: int, deadline: float, queue: int) -> None:
        self.workers = workers
        self.deadline = deadline
        self.queue = queue
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(workers)
        self._idle: list[_Process] = []
        self._running: set[_Process] = set()
        self._waiting = 0
        # A thread for every job `run` admits, so each waits on the timed `_slots`, never in the
        # executor's own queue, which has no deadline.
        self._threads = ThreadPoolExecutor(workers + queue, thread_name_prefix="render-wait")
        self._async_waiting = 0
        self._warming = 0
        self.replaced = 0  # processes killed at the deadline or found dead

    def pids(self) -> list[int]:
        """The pool's live processes (tests watch one be replaced)."""
        with self._lock:
            found = [*self._idle, *self._running]
        return [p.process.pid for p in found]

    def run_sync(self, function: Callable[..., Any], *args: object) -> object | Failure:
        """`function(*args)` in a pool process, or the `Failure` that stopped it."""
        if not self._slots.acquire(blocking=False):
            with self._lock:
                if self._waiting >= self.queue:
                    return Failure("busy", "the render queue is full")
                self._waiting += 1
            try:
                got = self._slots.acquire(timeout=self.deadline)
            finally:
                with self._lock:
                    self._waiting -= 1
            if not got:
                return Failure("busy", "no render process was free")
        try:
            return self._run_in_process(function, args)
        finally:
            self._slots.release()

    async def run(self, function: Callable[..., Any], *args: object) -> object | Failure:
        """`run_sync` for the event loop: the loop only awaits, a thread waits on the pipe."""
        if self._async_waiting >= self.workers + self.queue:
            return Failure("busy", "the render queue is full")
        self._async_waiting += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, self.run_sync, function, *args)
        finally:
            self._async_waiting -= 1

    def _run_in_process(self, function: Callable[..., Any], args: tuple[object, ...]) -> object:
        try:
            worker = self._take()
        except (EOFError, OSError) as exc:
            return Failure("crashed", str(exc))
        started = time.monotonic()
        logger.debug("Render job %s started in process %s", function.__name__, worker.process.pid)
        try:
            worker.conn.send((function, args))
            if not worker.conn.poll(self.deadline):
                self._discard(worker, "ran past the deadline")
                elapsed = time.monotonic() - started
                return Failure("deadline", f"stopped after {elapsed:.1f} s")
            ok, value = worker.conn.recv()
        except (EOFError, OSError) as exc:
            self._discard(worker, f"died ({exc or type(exc).__name__})")
            return Failure("crashed", "the render process died")
        self._give_back(worker)
        if not ok:
            logger.error("A render job failed: %s", value)
            return Failure("crashed", str(value))
        return value

    def _take(self) -> _Process:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.process.poll() is None:
                    self._running.add(worker)
                    return worker
                self._forget(worker)
        ours, theirs = socket.socketpair()
        code = f"from chatapp.rendering.pool import serve; serve({theirs.fileno()})"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([_ROOT, *sys.path])}
        with ours, theirs:
            process = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=[theirs.fileno()], env=env, cwd=_ROOT
            )
            parent = Connection(os.dup(ours.fileno()))
        worker = _Process(process, parent)
        with self._lock:
            self._running.add(worker)
        try:
            if not parent.poll(STARTUP_TIMEOUT) or parent.recv() != _READY:
                raise OSError("a render process did not start")
        except (EOFError, OSError):
            self._discard(worker, "did not start")
            raise
        return worker

    def warm(self) -> None:
        """Start the pool's processes in the background, if they are not all running: a new
        process takes a second or more to import the renderer, which the first answer's blocks
        should not wait for."""
        with self._lock:
            missing = self.workers - len(self._idle) - len(self._running) - self._warming
            if missing <= 0:
                return
            self._warming += missing

        def start() -> None:
            for _ in range(missing):
                try:
                    self._give_back(self._take())
                except (EOFError, OSError):
                    logger.warning("A render process did not start")
                finally:
                    with self._lock:
                        self._warming -= 1

        threading.Thread(target=start, name="render-warm", daemon=True).start()

    def _give_back(self, worker: _Process) -> None:
        worker.jobs += 1
        with self._lock:
            self._running.discard(worker)
            extra = len(self._idle) + len(self._running) >= self.workers
            if not extra:
                self._idle.append(worker)
        if extra:  # a job and `warm` both started one
            _end(worker)
            worker.conn.close()

    def _discard(self, worker: _Process, why: str) -> None:
        logger.warning("Render process %s %s: replaced", worker.process.pid, why)
        _end(worker)
        with self._lock:
            self._running.discard(worker)
            self._forget(worker)
            self.replaced += 1

    def _forget(self, worker: _Process) -> None:
        worker.conn.close()
        if worker.process.poll() is not None:
            worker.process.wait()

    def shutdown(self) -> None:
        with self._lock:
            workers = [*self._idle, *self._running]
            self._idle.clear()
        for worker in workers:
            _end(worker)
            worker.conn.close()
        self._threads.shutdown(wait=False, cancel_futures=True)


def _end(worker: _Process) -> None:
    worker.process.kill()
    try:
        worker.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        logger.warning("Render process %s did not exit when killed", worker.process.pid)


_ROOT = str(Path(__file__).resolve().parent.parent)  # where `chatapp` is imported from
_pool: RenderPool | None = None
_pool_lock = threading.Lock()


def pool() -> RenderPool:
    """The process's pool, made on first use from the settings."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = RenderPool(
                settings.CHAT_RENDER_WORKERS,
                settings.CHAT_RENDER_DEADLINE,
                settings.CHAT_RENDER_QUEUE,
            )
            atexit.register(shutdown)
        return _pool


def shutdown() -> None:
    """Kill the pool's processes; the next job makes a new pool."""
    global _pool
    with _pool_lock:
        found, _pool = _pool, None
    if found is not None:
        found.shutdown()


def warm() -> None:
    """`RenderPool.warm` for the process's pool."""
    pool().warm()


def run_sync(function: Callable[..., Any], *args: object) -> object | Failure:
    return pool().run_sync(function, *args)


async def run(function: Callable[..., Any], *args: object) -> object | Failure:
    return await pool().run(function, *args)
