"""Fixtures of the fault suite: the chat app in this process, its gateway behind a fault proxy.

As in `tests/chatapp`, each test has a fresh in-memory channel layer, fresh gateway configs and
a transactional database (the worker writes from its own threads). Every test's log is checked
at the end: a fault may be logged as a warning, never as a traceback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

from deploy.services import postgres_server
from gateway_client.emulator import EmulatorURL, serve_in_thread
from tests.django_fixtures import (  # noqa: F401 (used by name: pytest finds fixtures here)
    closed_clients,
    fresh_channel_layer,
    fresh_gateways,
)
from tests.multiprocess.servers import Server, User, prepare_database, sign_in, start_server

from .cluster import WS_MAX_BUFFERED, Cluster, ProxyThread, proxied_url, redis_that_restarts

TRACEBACK_FREE_LOGGERS = ("chatapp", "gateway_client", "asyncio", "django", "daphne")


@pytest.fixture(scope="session")
def fault_emulator() -> Iterator[EmulatorURL]:
    """Fast, and its records final at once, so a cost lookup after a fault takes no waiting."""
    with serve_in_thread(
        tokens_per_second=2000, ttft_ms=5, finalize_delay_ms=0, request_options=True
    ) as url:
        yield url


@pytest.fixture(autouse=True)
def fault_settings(settings: Any) -> Any:
    settings.LLM_API_KEY = "test-key"
    # Short enough that a stall or a drip ends a test in about a second.
    settings.LLM_TIMEOUTS = {"connect": 2.0, "first_token": 3.0, "idle": 1.0, "total": 8.0}
    settings.CHAT_SWEEP_INTERVAL = 0
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "chatapp.patches.channel_layer.LocalChannelLayer"}
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return settings


@pytest.fixture(autouse=True)
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Fails the test if anything logged an exception with its traceback, in any phase."""
    caplog.set_level(logging.INFO)
    yield caplog
    # `caplog.records` and `caplog.text` are the current phase's (teardown) only.
    records = [
        *caplog.get_records("setup"),
        *caplog.get_records("call"),
        *caplog.records,
    ]
    with_traces = [
        f"{record.name}: {record.getMessage()}"
        for record in records
        if record.exc_info or record.stack_info or "Traceback" in record.getMessage()
    ]
    assert not with_traces, "a fault escaped as a traceback:\n" + "\n".join(with_traces)


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="fault-suite-password")


# --- The cluster of the infrastructure faults (session-scoped, started by the first test that
# asks for it) ---------------------------------------------------------------------------------

USERNAME, PASSWORD = "dora", "fault-suite-cluster-password"


@pytest.fixture(scope="session")
def cluster(
    fault_emulator: EmulatorURL, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("fault-cluster")
    with redis_that_restarts() as redis, postgres_server() as postgres_url:
        port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
        database = ProxyThread(("127.0.0.1", port))
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.faults.cluster_settings",
            "DATABASE_URL": proxied_url(postgres_url, database.proxy.port),
            "REDIS_URL": redis.url,
            "DJANGO_SECRET_KEY": "fault-suite-only",
            "CHAT_TITLES": "0",  # no title generations in the ledgers the tests read
            "DJANGO_DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "LLM_BASE_URL": f"{fault_emulator}/numes/api/v1",
            "LLM_API_KEY": "sk-faults",
            "PYTHONUNBUFFERED": "1",
            "TEST_CHAT_WS_MAX_BUFFERED": os.environ.get(
                "TEST_CHAT_WS_MAX_BUFFERED", str(WS_MAX_BUFFERED)
            ),
        }
        try:
            prepare_database({**env, "DATABASE_URL": postgres_url}, USERNAME, PASSWORD)
            yield Cluster(redis, database, postgres_url, env, directory)
        finally:
            database.close()


@pytest.fixture(scope="session")
def server_a(cluster: Cluster) -> Iterator[Server]:
    """The cluster's long-lived server; it runs the sweep."""
    server = start_server("A", cluster.env, cluster.directory)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def dora(server_a: Server, cluster: Cluster) -> User:
    return User(sign_in(server_a, USERNAME, PASSWORD), cluster.postgres_url)
