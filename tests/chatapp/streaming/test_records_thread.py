"""The records thread takes its work by urgency (`chatapp/records_thread.py`)."""

from __future__ import annotations

import threading

import pytest

from chatapp.records_thread import Priority, RecordsThread


def test_queued_calls_run_most_urgent_first_and_in_order_within_one_priority() -> None:
    thread = RecordsThread("test-records")
    held = threading.Event()
    ran: list[str] = []
    busy = thread.submit(Priority.ANSWER, lambda: held.wait(10))
    futures = [
        thread.submit(priority, lambda name=name: ran.append(name))
        for priority, name in [
            (Priority.BACKGROUND, "title 1"),
            (Priority.ANSWER, "final 1"),
            (Priority.BACKGROUND, "title 2"),
            (Priority.USER_WAITING, "send 1"),
            (Priority.ANSWER, "final 2"),
            (Priority.USER_WAITING, "send 2"),
        ]
    ]
    assert thread.queued() == 6
    held.set()
    assert busy.result(10)
    for future in futures:
        future.result(10)
    assert ran == ["send 1", "send 2", "final 1", "final 2", "title 1", "title 2"]
    assert thread.queued() == 0


def test_a_call_that_raises_gives_its_caller_the_exception_and_the_thread_serves_on() -> None:
    thread = RecordsThread("test-records")

    def fails() -> None:
        raise LookupError("no such row")

    with pytest.raises(LookupError, match="no such row"):
        thread.submit(Priority.USER_WAITING, fails).result(10)
    assert thread.submit(Priority.ANSWER, lambda: 42).result(10) == 42
