"""Samples the server while a round runs: its memory, CPU, statement counters, what is on disk.

A thread of the orchestrator, which is no measured process: every 0.1 s the Daphne processes'
VmRSS and CPU time from /proc, summed; every 0.3 s the statement counters (`GET /__bench__/db` of
each process, answered before Django, summed by `merge_counters`) and every generation's `last_seq`
and status, read from the database itself (`database`), so "on disk" means committed. On SQLite
a read holds the shared lock for about a millisecond; the app waits for it (busy timeout) as it
would for any reader.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .database import ERRORS, Target, open_db, read_disk
from .stack import children, cpu_seconds, proc_status_kb

RSS_EVERY_S = 0.1
SLOW_EVERY = 3  # counters and disk every third tick


@dataclass(slots=True)
class Samples:
    rss: list[tuple[float, int]] = field(default_factory=list)  # (time, kB)
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (time, CPU seconds)
    idle_cpu_per_s: float | None = None  # the same processes' CPU per second before "go"
    counters: list[dict[str, Any]] = field(default_factory=list)  # dbcount snapshots ("t")
    disk: list[tuple[float, dict[int, tuple[int, str]]]] = field(default_factory=list)


def counters(client: httpx.Client, url: str) -> dict[str, Any] | None:
    try:
        response = client.get(url)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


# Counted from `BEGIN`, which Django sends itself on SQLite only (psycopg opens PostgreSQL's
# transactions in the driver, unseen by an execute wrapper): not summed over processes.
TRANSACTION_KEYS = ("transactions", "write_transactions")


def merge_counters(snapshots: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One process's counters as they are; several processes' summed (None when any is missing,
    a sum of some being no figure), their transaction counts None (`TRANSACTION_KEYS`)."""
    if not snapshots or any(s is None for s in snapshots):
        return None
    if len(snapshots) == 1:
        return snapshots[0]
    found = [s for s in snapshots if s is not None]
    merged: dict[str, Any] = {"t": max(s["t"] for s in found)}
    for key in ("statements", "writes", "seconds"):
        merged[key] = sum(s[key] for s in found)
    for key in TRANSACTION_KEYS:
        merged[key] = None
    for key in ("by_write", "partial_flushes"):
        total: Counter[str] = Counter()
        for s in found:
            total.update(s[key])
        merged[key] = dict(total)
    return merged


def read_counters(client: httpx.Client, urls: Sequence[str]) -> dict[str, Any] | None:
    return merge_counters([counters(client, url) for url in urls]) if urls else None


def total_cpu_seconds(pids: Sequence[int]) -> float | None:
    """CPU time of the Daphne processes and of their children (the render pools, which parse
    the live blocks), summed; None when a Daphne process is gone."""
    found = [cpu_seconds(pid) for pid in pids]
    if any(s is None for s in found):
        return None
    return sum(s or 0 for s in found) + sum(
        cpu_seconds(child) or 0 for pid in pids for child in children(pid)
    )


def idle_cpu_per_s(pids: Sequence[int], seconds: float) -> float | None:
    """CPU seconds per second the processes use while nothing is asked of them (timers, the
    sockets' keep-alives, the render pools' waits): subtracted from a window's CPU."""
    before, started = total_cpu_seconds(pids), time.monotonic()
    time.sleep(seconds)
    after, ended = total_cpu_seconds(pids), time.monotonic()
    if before is None or after is None:
        return None
    return (after - before) / (ended - started)


def total_rss_kb(pids: Sequence[int]) -> int | None:
    found = [proc_status_kb(pid, "VmRSS") for pid in pids]
    return None if any(kb is None for kb in found) else sum(kb or 0 for kb in found)


class Sampler:
    def __init__(
        self,
        pids: Sequence[int],
        stats_urls: Sequence[str],
        db: Target,
        after: int,
        *,
        disk: bool = True,
    ) -> None:
        self.pids = pids
        self.stats_urls = stats_urls
        self.db = db
        self.after = after
        self.disk = disk
        self.samples = Samples()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> Samples:
        self._stop.set()
        self._thread.join(10)
        return self.samples

    def _run(self) -> None:
        samples = self.samples
        tick = 0
        with (
            httpx.Client(trust_env=False, timeout=5) as client,
            contextlib.closing(open_db(self.db)) as db,
        ):
            while not self._stop.is_set():
                started = time.time()
                rss = total_rss_kb(self.pids)
                if rss is not None:
                    samples.rss.append((started, rss))
                cpu = total_cpu_seconds(self.pids)
                if cpu is not None:
                    samples.cpu.append((started, cpu))
                if tick % SLOW_EVERY == 0:
                    snapshot = read_counters(client, self.stats_urls)
                    if snapshot is not None:
                        samples.counters.append(snapshot)
                    if self.disk:
                        read_at = time.time()  # what the read sees was committed by then
                        with contextlib.suppress(*ERRORS):
                            samples.disk.append((read_at, read_disk(db, self.after)))
                tick += 1
                self._stop.wait(max(0.0, RSS_EVERY_S - (time.time() - started)))
