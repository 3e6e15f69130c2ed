"""A generation's IDs on every line logged while its worker runs, and on no other line."""

from __future__ import annotations

import asyncio
import logging

from chatapp.streaming.log_context import ContextFilter, bind_generation, current


def record(message: str) -> logging.LogRecord:
    entry = logging.LogRecord(
        "chatapp.streaming.worker", logging.INFO, __file__, 1, message, (), None
    )
    assert ContextFilter().filter(entry) is True
    return entry


async def test_each_worker_task_tags_its_own_lines() -> None:
    seen: dict[str, logging.LogRecord] = {}

    async def worker(generation: int, conversation: int) -> None:
        bind_generation(generation, conversation)
        await asyncio.sleep(0)  # the other worker runs in between
        seen[f"worker {generation}"] = record(f"from {generation}")

    await asyncio.gather(worker(12, 3), worker(13, 4))
    seen["outside"] = record("between generations")
    assert {name: (r.generation, r.conversation, r.context) for name, r in seen.items()} == {
        "worker 12": (12, 3, " [generation=12 conversation=3]"),
        "worker 13": (13, 4, " [generation=13 conversation=4]"),
        "outside": (None, None, ""),
    }
    assert current() is None


async def test_tasks_and_threads_the_worker_starts_carry_its_ids() -> None:
    from asgiref.sync import sync_to_async

    bind_generation(7, 2)
    in_task = await asyncio.create_task(asyncio.to_thread(lambda: record("thread")))
    in_sync = await sync_to_async(lambda: record("sync_to_async"))()
    assert (in_task.generation, in_sync.generation) == (7, 7)


async def test_the_plain_format_puts_the_ids_after_the_logger_name() -> None:
    from django.conf import settings

    formatter = logging.Formatter(settings.LOGGING["formatters"]["plain"]["format"])
    bind_generation(12, 3)
    assert formatter.format(record("Generation 12 refused: 429")).endswith(
        " INFO chatapp.streaming.worker [generation=12 conversation=3]: Generation 12 refused: 429"
    )
