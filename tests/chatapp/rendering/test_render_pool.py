"""The render pool: jobs run in its processes, one that overruns its deadline or dies is killed
and replaced, a full queue refuses at once, and the loop's API only awaits."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from chatapp.rendering import answer_html, pool_jobs
from chatapp.rendering import pool as render_pool
from chatapp.rendering.markdown import PLAIN_TEXT_NOTES, render_markdown
from chatapp.rendering.pool import Failure, RenderPool

from . import render_jobs_for_tests as jobs

SLEEP_S = 30.0  # a job that would run this long


@pytest.fixture
def pool() -> Iterator[RenderPool]:
    found = RenderPool(workers=1, deadline=1.0, queue=2)
    yield found
    found.shutdown()


def test_a_job_runs_in_another_process_that_serves_the_next_one(pool: RenderPool) -> None:
    first = pool.run_sync(jobs.pid)
    assert isinstance(first, int)
    assert first != os.getpid()
    assert pool.run_sync(jobs.pid) == first
    assert pool.run_sync(pool_jobs.render, "*hi*", [], "m1") == render_markdown("*hi*")


def test_a_job_past_its_deadline_is_stopped_and_its_process_replaced(pool: RenderPool) -> None:
    before = pool.run_sync(jobs.pid)
    result = pool.run_sync(jobs.sleep, 30.0)
    assert isinstance(result, Failure)
    assert result.kind == "deadline"
    assert pool.replaced == 1
    after = pool.run_sync(jobs.pid)
    assert isinstance(after, int)
    assert after != before
    assert pool.pids() == [after]


def test_a_process_that_dies_is_replaced(pool: RenderPool) -> None:
    result = pool.run_sync(jobs.die)
    assert isinstance(result, Failure)
    assert result.kind == "crashed"
    assert pool.replaced == 1
    assert pool.run_sync(jobs.sleep, 0) == "slept"


def test_a_job_that_raises_fails_and_its_process_serves_on(pool: RenderPool) -> None:
    before = pool.run_sync(jobs.pid)
    result = pool.run_sync(jobs.fail)
    assert result == Failure("crashed", "ValueError: a bug in the job")
    assert pool.run_sync(jobs.pid) == before
    assert pool.replaced == 0


def test_a_job_past_its_memory_fails_and_its_process_serves_on(pool: RenderPool) -> None:
    result = pool.run_sync(jobs.allocate, 2048)
    assert result == Failure("crashed", "MemoryError: ")
    assert pool.run_sync(jobs.allocate, 16) == 16 << 20


async def test_the_loop_only_awaits_while_a_job_runs(pool: RenderPool) -> None:
    ticks = 0
    job = asyncio.ensure_future(pool.run(jobs.sleep, 0.5))
    while not job.done():
        ticks += 1
        await asyncio.sleep(0.01)
    assert await job == "slept"
    assert ticks > 5  # the loop went on turning while the process slept


async def test_a_full_queue_refuses_at_once() -> None:
    pool = RenderPool(workers=1, deadline=5.0, queue=0)
    try:
        running = asyncio.ensure_future(pool.run(jobs.sleep, 1.0))
        await asyncio.sleep(0)
        refused = await pool.run(jobs.sleep, 0)
        assert refused == Failure("busy", "the render queue is full")
        assert await running == "slept"
    finally:
        pool.shutdown()


def test_an_answer_past_the_deadline_shows_as_marked_plain_text(settings: object) -> None:
    render_pool.shutdown()
    settings.CHAT_RENDER_DEADLINE = 0.5  # type: ignore[attr-defined]
    try:
        slow = "![" * 50_000  # about 3 s to render here
        rendered = answer_html.render_answer_sync(slow + "<b>", [], "m1")
        assert rendered.keep  # kept: it would only run out again at the next view
        assert rendered.html.startswith(
            f'<p class="render-fallback">{PLAIN_TEXT_NOTES["deadline"]}'
        )
        assert "&lt;b&gt;</code></pre>" in rendered.html  # escaped, never markup
        assert render_pool.pool().replaced == 1
        quick = answer_html.render_answer_sync("*fine*", [], "m1")
        assert quick.html == "<p><em>fine</em></p>\n"
    finally:
        render_pool.shutdown()


async def test_a_flood_of_slow_jobs_waits_no_longer_than_a_deadline_each() -> None:
    pool = RenderPool(workers=1, deadline=0.5, queue=3)
    try:
        assert isinstance(pool.run_sync(jobs.pid), int)  # a process is up: no start to wait on
        loop = asyncio.get_running_loop()
        began = loop.time()

        async def timed() -> tuple[object, float]:
            result = await pool.run(jobs.sleep, SLEEP_S)
            return result, loop.time() - began

        finished = await asyncio.gather(*(timed() for _ in range(4)))
        results = [result for result, _ in finished]
        busy = Failure("busy", "no render process was free")
        # The first runs into its deadline; the others give up waiting at theirs, which end at
        # the same moment: on a loaded machine the slot the first frees may go to one of them
        # first (it then runs into its own deadline), so two or three are busy, never fewer.
        assert results.count(busy) >= 2
        ran = [result for result in results if result != busy]
        assert ran
        assert all(isinstance(result, Failure) and result.kind == "deadline" for result in ran)
        # Each waited its deadline (lower bound: a loaded machine only adds), none the sleep.
        assert all(pool.deadline <= elapsed < SLEEP_S for _, elapsed in finished)
    finally:
        pool.shutdown()
