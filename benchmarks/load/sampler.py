"""Samples the server while a round runs: its memory, its statement counters, what is on disk.

A thread of the orchestrator, which is no measured process: every 0.1 s the Daphne process's
VmRSS from /proc; every 0.3 s the statement counters (`GET /__bench__/db`, answered before
Django) and every generation's `last_seq` and status, read from the SQLite file itself, so "on
disk" means committed. A read holds SQLite's shared lock for about a millisecond; the app waits
for it (busy timeout) as it would for any reader.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .stack import proc_status_kb

RSS_EVERY_S = 0.1
SLOW_EVERY = 3  # counters and disk every third tick


@dataclass(slots=True)
class Samples:
    rss: list[tuple[float, int]] = field(default_factory=list)  # (time, kB)
    counters: list[dict[str, Any]] = field(default_factory=list)  # dbcount snapshots ("t")
    disk: list[tuple[float, dict[int, tuple[int, str]]]] = field(default_factory=list)


def read_disk(connection: sqlite3.Connection, after: int) -> dict[int, tuple[int, str]]:
    rows = connection.execute(
        "SELECT id, last_seq, status FROM chatapp_generation WHERE id > ?", (after,)
    )
    return {pk: (seq, status) for pk, seq, status in rows}


def open_db(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, timeout=5, isolation_level=None, check_same_thread=False
    )


def counters(client: httpx.Client, url: str | None) -> dict[str, Any] | None:
    if url is None:
        return None
    try:
        response = client.get(url)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


class Sampler:
    def __init__(
        self, pid: int, stats_url: str | None, db: Path, after: int, *, disk: bool = True
    ) -> None:
        self.pid = pid
        self.stats_url = stats_url
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
                rss = proc_status_kb(self.pid, "VmRSS")
                if rss is not None:
                    samples.rss.append((started, rss))
                if tick % SLOW_EVERY == 0:
                    snapshot = counters(client, self.stats_url)
                    if snapshot is not None:
                        samples.counters.append(snapshot)
                    if self.disk:
                        read_at = time.time()  # what the read sees was committed by then
                        with contextlib.suppress(sqlite3.Error):
                            samples.disk.append((read_at, read_disk(db, self.after)))
                tick += 1
                self._stop.wait(max(0.0, RSS_EVERY_S - (time.time() - started)))
