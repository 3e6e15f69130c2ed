"""Process control shared by the loopback cluster, the multi-process tests and the load benchmark.

A started process is ready when its TCP port accepts a connection (polled, with the process
checked for an early exit on each round); it is stopped by SIGTERM, then SIGKILL if it has not
exited within the grace period. Errors carry the tail of the process's log, which is where the
reason is.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["START_TIMEOUT", "ServiceError", "free_port", "stop", "tail", "wait_for_port"]

START_TIMEOUT = 30.0


class ServiceError(RuntimeError):
    """A service could not be found or started; the message says what to do or what it said."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").split("\n")[-lines:])
    except OSError:
        return "(no log)"


def wait_for_port(
    name: str,
    port: int,
    process: subprocess.Popen[bytes] | None = None,
    *,
    log: Callable[[], str] = lambda: "(no log)",
    timeout: float = START_TIMEOUT,
    ready: Callable[[int], bool] = port_open,
) -> None:
    """Until `ready(port)` (by default: it accepts a connection); a ServiceError with the log if
    `process` exits first or the timeout passes."""
    deadline = time.monotonic() + timeout
    while not ready(port):
        if process is not None and process.poll() is not None:
            raise ServiceError(f"{name} exited ({process.returncode}):\n{log()}")
        if time.monotonic() > deadline:
            raise ServiceError(f"{name} did not start within {timeout:.0f} s:\n{log()}")
        time.sleep(0.02)


def stop(*processes: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM to each, then SIGKILL to any still running `grace` seconds later; returns once all
    have exited (and are reaped). Several are stopped together: their shutdowns overlap."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
