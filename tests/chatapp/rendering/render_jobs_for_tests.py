"""Jobs for the render pool's tests: importable by its processes, as every job must be."""

from __future__ import annotations

import os
import time


def sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def pid() -> int:
    return os.getpid()


def die() -> None:
    os._exit(3)


def fail() -> None:
    raise ValueError("a bug in the job")


def allocate(megabytes: int) -> int:
    return len(bytearray(megabytes << 20))
