"""A burst of sends larger than the database pool is served, not deadlocked.

Each request reads its session and user on its own thread, then waits for the records thread to
write the turn, which needs a connection too: while the requests kept theirs, a burst as large
as the pool left the records thread none, and every send hung until the pool's timeout and
failed. A server with a pool of 3 takes 12 new chats at once here; each must start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from .servers import Server, User, add_user, sign_in, start_server

pytestmark = pytest.mark.multiprocess

SENDS = 12
USERNAME, PASSWORD = "pat", "a-pool-of-three"


@pytest.fixture
def small_pool_server(cluster_env: dict[str, str], cluster_dir: Path) -> Iterator[Server]:
    env = {
        **cluster_env,
        "DATABASE_POOL_MIN_SIZE": "1",
        "DATABASE_POOL_MAX_SIZE": "3",
        # Long enough for any honest wait on a loaded machine; a deadlock waits it out and fails.
        "DATABASE_POOL_TIMEOUT": "8",
        "CHAT_GENERATIONS_PER_MINUTE": "1000",
    }
    server = start_server("small-pool", env, cluster_dir)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


async def test_more_sends_at_once_than_the_pool_has_connections_all_start(
    small_pool_server: Server, postgres_url: str
) -> None:
    # A user of its own: the suite's user would use up its answers per minute for later tests.
    add_user(postgres_url, USERNAME, PASSWORD)
    user = User(sign_in(small_pool_server, USERNAME, PASSWORD), postgres_url)

    async def send(index: int) -> tuple[int, str]:
        async with user.http(small_pool_server) as http:
            data = {"content": f"Burst {index}", "model": "emulator/chat"}
            response = await http.post("/c/new/send/", data=data, timeout=60)
        return response.status_code, response.headers.get("location", response.text[:300])

    results = await asyncio.gather(*(send(index) for index in range(SENDS)))
    assert [status for status, _ in results] == [302] * SENDS, results
    assert all(location.startswith("/c/") for _, location in results), results
    assert "PoolTimeout" not in small_pool_server.log.read_text(errors="replace")
