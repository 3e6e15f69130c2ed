"""The allocator's trim as answers end (`chatapp.streaming.memory_trim`)."""

from __future__ import annotations

import asyncio
import platform
from typing import Any

import pytest

from chatapp.streaming import memory_trim


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch, settings: Any) -> list[int]:
    """The trims asked for (instead of glibc's), with a trim due at once."""
    asked: list[int] = []

    def trim(pad: int) -> int:
        asked.append(pad)
        return 1

    monkeypatch.setattr(memory_trim, "_malloc_trim", trim)
    monkeypatch.setattr(memory_trim, "_last", float("-inf"))
    settings.CHAT_MALLOC_TRIM_INTERVAL = 60.0
    return asked


async def trimmed() -> None:
    await asyncio.wait_for(asyncio.shield(memory_trim._running), 5)  # type: ignore[arg-type]


async def test_answers_ending_while_others_run_trim_once_per_interval(
    trims: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_trim.answer_ended(last=False)
    await trimmed()
    memory_trim.answer_ended(last=False)  # within the interval: nothing
    assert trims == [0]
    monkeypatch.setattr(memory_trim, "_last", asyncio.get_running_loop().time() - 61)
    memory_trim.answer_ended(last=False)
    await trimmed()
    assert trims == [0, 0]


async def test_the_last_answer_ending_trims_at_once(trims: list[int]) -> None:
    memory_trim.answer_ended(last=False)
    await trimmed()
    memory_trim.answer_ended(last=True)  # within the interval, but nothing runs any more
    await trimmed()
    assert trims == [0, 0]


async def test_no_trim_when_switched_off(trims: list[int], settings: Any) -> None:
    settings.CHAT_MALLOC_TRIM_INTERVAL = 0
    memory_trim.answer_ended(last=True)
    assert trims == []


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_s_trim_is_found_and_runs() -> None:
    assert memory_trim._malloc_trim is not None
    memory_trim._trim()
