"""Infrastructure faults on real Daphne processes, PostgreSQL and Redis (see `cluster.py`).

A server killed mid-stream, Redis restarted mid-stream, the database away for 5 s mid-stream.
Each answer must reach one terminal state the page is told of, with the text kept, and no server
may log a traceback for it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.multiprocess.servers import Server, User, start_server

from .browser_model import ShownAnswer
from .cluster import Cluster, env_for, log_excerpt, no_tracebacks
from .pages import follow_page, follow_reconnecting

pytestmark = pytest.mark.multiprocess

FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
ENDLESS = "emulator/long?tokens_per_second=40"
SHORT = "emulator/long?tokens_per_second=150&long_tokens=300"  # about 2 s
MEDIUM = "emulator/long?tokens_per_second=150&long_tokens=600"  # about 4 s
OUTAGE = 5.0  # seconds the database is away


async def conversation(user: User, server: Server) -> int:
    """A conversation with one finished turn, so that a socket can watch it before the next."""
    conversation_pk = await user.new_conversation(server, "Hello there", FAST)
    await user.wait_idle(conversation_pk)
    return conversation_pk


def assert_clean_log(server: Server, since: int = 0) -> None:
    log = server.log_text()[since:]
    assert no_tracebacks(log) == [], log_excerpt(log)


async def test_redis_restarted_mid_stream_the_page_recovers_by_snapshot(
    dora: User, server_a: Server, cluster: Cluster
) -> None:
    conversation_pk = await conversation(dora, server_a)
    log_start = len(server_a.log_text())
    generation_pk = await dora.send(server_a, conversation_pk, "A long story", MEDIUM)
    page = ShownAnswer(generation_pk)
    following = asyncio.create_task(
        follow_reconnecting(dora, server_a, conversation_pk, page, within=30)
    )
    await _until(lambda: len(page.applied) >= 3, what="a few deltas")
    cluster.redis.restart()
    closes = await following
    row = await dora.wait_generation(generation_pk, within=10)
    print(
        f"redis restart: sockets closed with {closes}, {page.snapshot_asks} snapshot asks, "
        f"{page.snapshots} snapshots, "
        f"shown {len(page.content)}/{len(row['content'])} chars"
    )
    assert row["status"] == "completed"
    assert page.done is not None
    assert page.done["status"] == "completed"
    assert page.not_prefix_of(row["content"]) == []
    assert page.content == row["content"]
    assert_clean_log(server_a, log_start)


async def test_the_database_away_for_5_s_mid_stream_loses_nothing(
    dora: User, server_a: Server, cluster: Cluster
) -> None:
    """The answer ends while the database is away: its partial flushes fail and are retried, and
    its final write waits for the database (`records_thread.RETRY_FOR`)."""
    conversation_pk = await conversation(dora, server_a)
    log_start = len(server_a.log_text())
    async with dora.socket(server_a, conversation_pk) as socket:
        generation_pk = await dora.send(server_a, conversation_pk, "A long story", SHORT)
        page = ShownAnswer(generation_pk)
        following = asyncio.create_task(follow_page(socket, page, within=30))
        await dora.wait_generation(generation_pk, within=10, until=lambda row: row["content"] != "")
        cluster.database.outage(OUTAGE)
        down_at = time.monotonic()
        await following
        done_after = time.monotonic() - down_at
    row = await dora.generation(generation_pk)
    print(f"database outage: done {done_after:.1f} s after it began; stored {len(row['content'])}")
    assert done_after >= OUTAGE - 1, "the answer was over before the outage: it tested nothing"
    assert row["status"] == "completed"
    assert row["finished_at"] is not None
    assert page.dones == 1
    assert page.not_prefix_of(row["content"]) == []
    assert page.content == row["content"]
    assert len(row["content"]) > 1000
    assert_clean_log(server_a, log_start)


async def test_a_killed_server_s_answer_is_interrupted_with_its_flushed_text_kept(
    dora: User, server_a: Server, cluster: Cluster
) -> None:
    """Server A sweeps, after the faults above: its sweep must have outlived them (a database
    outage used to leave its connection broken, and every later sweep failing)."""
    victim = start_server(
        "victim", env_for(cluster.env, TEST_CHAT_SWEEP_INTERVAL=0), cluster.directory
    )
    try:
        victim.wait_ready()
        conversation_pk = await conversation(dora, victim)
        log_start = len(server_a.log_text())
        async with dora.socket(server_a, conversation_pk) as socket:
            generation_pk = await dora.send(victim, conversation_pk, "A long story", ENDLESS)
            page = ShownAnswer(generation_pk)
            following = asyncio.create_task(follow_page(socket, page, within=30))
            flushed = await dora.wait_generation(
                generation_pk, within=10, until=lambda row: len(row["content"]) > 0
            )
            victim.kill()
            killed_at = time.monotonic()
            await following
        swept_after = time.monotonic() - killed_at
    finally:
        victim.stop()
    row = await dora.generation(generation_pk)
    print(
        f"killed server: interrupted by the sweep after {swept_after:.1f} s; shown "
        f"{len(page.content)} chars, stored {len(row['content'])}, "
        f"flushed before the kill {len(flushed['content'])}"
    )
    assert row["status"] == "interrupted"
    assert page.done == {
        "t": "done",
        "g": generation_pk,
        "seq": row["last_seq"],
        "status": "interrupted",
    }
    assert page.dones == 1
    assert row["content"].startswith(flushed["content"]), "text flushed before the kill was lost"
    # What the page was shown after the last flush died with the process: here the stored text
    # is a prefix of the shown one, and the page's final render (the stored text) replaces it.
    assert page.content.startswith(row["content"])
    assert "interrupted" in row["error_message"] or row["error_type"] == "interrupted"
    assert_clean_log(server_a, log_start)


async def _until(condition: Any, *, what: str, within: float = 15.0) -> None:
    from tests.waiting import eventually

    await eventually(condition, what=what, within=within)
