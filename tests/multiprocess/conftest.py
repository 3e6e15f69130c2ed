"""Two Daphne processes sharing a private PostgreSQL database and a private Redis channel layer.

Session-scoped: Redis, PostgreSQL (migrated once, one user), a paced emulator served by this
process, and servers A and B. Only B runs the heartbeat sweep, so a test knows which process
swept. `victim` is a third server for a test that kills it. Beside them, from the start, part of
the database-backed suite runs again on the same PostgreSQL cluster (`suite.py`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.services import CHROMA, chroma_server, postgres_server, redis_server
from gateway_client.emulator import EmulatorURL, serve_in_thread

from .servers import Server, User, prepare_database, sign_in, start_server
from .suite import SuiteRun

USERNAME, PASSWORD = "carol", "multi-process-password"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def chroma_url() -> Iterator[str]:
    """A private Chroma server (`make chroma`), for knowledge collections' vectors."""
    unreachable = CHROMA.parent.parent / ".unreachable"
    if unreachable.exists():  # the package index was unreachable when it was to be installed
        pytest.skip(unreachable.read_text().strip())
    with chroma_server() as (url, _):
        yield url


@pytest.fixture(scope="session", autouse=True)
def postgres_suite(
    servers: tuple[Server, Server], postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SuiteRun]:
    """Started once the servers are up, to run while the tests mostly wait."""
    run = SuiteRun(postgres_url, tmp_path_factory.mktemp("suite") / "pytest.log")
    yield run
    run.stop()


@pytest.fixture(scope="session")
def paced_emulator() -> Iterator[EmulatorURL]:
    """Paced so a stream can be watched and stopped; tests pick speeds per request."""
    with serve_in_thread(tokens_per_second=100, ttft_ms=50, request_options=True) as url:
        yield url


@pytest.fixture(scope="session")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="session")
def cluster_env(redis_url: str, postgres_url: str, paced_emulator: EmulatorURL) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.multiprocess.settings",
        "DATABASE_URL": postgres_url,
        "REDIS_URL": redis_url,
        "DJANGO_SECRET_KEY": "multi-process-tests-only",
        "CHAT_TITLES": "0",  # no title generations in the ledgers the tests read
        "DJANGO_DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LLM_BASE_URL": f"{paced_emulator}/numes/api/v1",
        "LLM_API_KEY": "sk-multi-process",
        "PYTHONUNBUFFERED": "1",
        "TEST_CHAT_SWEEP_INTERVAL": "0",
        # test_spending_limits.py: its checks of one limit overlap across the two servers
        # (`slow_reservations.py`: only where a limit applies).
        "TEST_SLOW_RESERVATION": "0.2",
    }


@pytest.fixture(scope="session")
def servers(cluster_env: dict[str, str], cluster_dir: Path) -> Iterator[tuple[Server, Server]]:
    """Started first: the database is prepared while they boot (they touch it only later)."""
    a = start_server("A", cluster_env, cluster_dir)
    b = start_server("B", {**cluster_env, "TEST_CHAT_SWEEP_INTERVAL": "1"}, cluster_dir)
    try:
        prepare_database(cluster_env, USERNAME, PASSWORD)
        a.wait_ready()
        b.wait_ready()
        yield a, b
    finally:
        a.stop()
        b.stop()


@pytest.fixture
def server_a(servers: tuple[Server, Server]) -> Server:
    return servers[0]


@pytest.fixture
def server_b(servers: tuple[Server, Server]) -> Server:
    return servers[1]


VICTIM_BOOT_S = 600.0  # past pytest-timeout's 120 s: the hang guard is the test's own


@pytest.fixture
def victim(
    servers: tuple[Server, Server], cluster_env: dict[str, str], cluster_dir: Path
) -> Iterator[Server]:
    server = start_server("victim", cluster_env, cluster_dir)
    try:
        # Booted inside the test, unlike A and B: on two cores shared with a test suite, Django's
        # and Daphne's imports alone took over 30 s. A hang is ended by the test's own timeout.
        server.wait_ready(timeout=VICTIM_BOOT_S)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def user(servers: tuple[Server, Server], postgres_url: str) -> User:
    return User(sign_in(servers[0], USERNAME, PASSWORD), postgres_url)
