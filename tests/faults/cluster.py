"""Real servers for the infrastructure faults: Daphne processes on private PostgreSQL and Redis.

Built from `tests/multiprocess` (its services and server helpers), with what breaking them needs:
a Redis that can be restarted on its port (empty, as after a crash with persistence off), and
PostgreSQL reached only through a `FaultProxy` on a thread of its own, so the database can vanish
for a few seconds (every connection reset, new ones refused) without stopping the cluster.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.processes import free_port, wait_for_port
from deploy.services import redis_server_binary

from .fault_proxy import FaultProxy, Forward

START_TIMEOUT = 30.0
# The servers' CHAT_WS_MAX_BUFFERED (TEST_CHAT_WS_MAX_BUFFERED; 0 turns the bound off, to measure
# without it): small, so that a short answer shows a silent socket's backlog stopping there.
WS_MAX_BUFFERED = 64 * 1024


class RestartableRedis:
    """`redis-server` on a fixed loopback port, with no persistence: a restart loses everything
    (groups, queued messages), as a crash would."""

    def __init__(self) -> None:
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="gateway-chat-faults-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [
            redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"), "--daemonize", "no",
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        wait_for_port("redis-server", self.port, self.process, timeout=START_TIMEOUT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # a crash: no save, no goodbye to the clients
            self.process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()


class ProxyThread:
    """A `FaultProxy` served by an event loop on its own thread (the tests' loops are per test)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.loop = asyncio.new_event_loop()
        self.proxy = FaultProxy(target, lambda _n: Forward())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)

    def outage(self, seconds: float) -> None:
        """Make the target unreachable for `seconds`, from now (returns at once)."""

        async def down() -> None:
            async with self.proxy.outage():
                await asyncio.sleep(seconds)  # the fault itself: how long the database is away

        asyncio.run_coroutine_threadsafe(down(), self.loop)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class Cluster:
    redis: RestartableRedis
    database: ProxyThread
    postgres_url: str  # direct, for the tests' own reads
    env: dict[str, str]
    directory: Path


def proxied_url(postgres_url: str, port: int) -> str:
    head, _, tail = postgres_url.rpartition("@")
    _, _, path = tail.partition("/")
    return f"{head}@127.0.0.1:{port}/{path}"


@contextmanager
def redis_that_restarts() -> Iterator[RestartableRedis]:
    redis = RestartableRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


def no_tracebacks(log: str) -> list[str]:
    """The lines of a server's log that start a traceback (should be none)."""
    return [line for line in log.splitlines() if "Traceback" in line]


def log_excerpt(log: str, lines: int = 60) -> str:
    return "\n".join(log.splitlines()[-lines:])


def env_for(cluster_env: dict[str, str], **changes: Any) -> dict[str, str]:
    return {**cluster_env, **{key: str(value) for key, value in changes.items()}}
