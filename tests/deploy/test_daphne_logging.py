"""The log a real Daphne process writes: each line once, a generation's IDs on its lines, and
with LOG_FORMAT=json nothing but JSON objects, one per line.

Two servers, plain and json, on one SQLite database and one emulator; each is sent a message
whose upstream request is refused, so the worker logs a warning about its generation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from deploy.cluster import DAPHNE_OPTIONS as DEPLOYED_OPTIONS
from gateway_client.emulator import EmulatorURL, serve_in_thread
from tests.multiprocess.servers import Server, User, prepare_database, sign_in, start_server
from tests.waiting import poll

pytestmark = pytest.mark.slow

USERNAME, PASSWORD = "erin", "logging-test-password"
REFUSED = "emulator/error-before"
GENERATION_LINE = re.compile(r"Generation (\d+) refused")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    directory = tmp_path_factory.mktemp("logging")
    with serve_in_thread(tokens_per_second=2000, ttft_ms=5, request_options=True) as url:
        env = environment(directory, url)
        started = {
            "plain": start_server("plain", env, directory),
            # As deploy/ runs it: Daphne's access log is not a log record (it is written to
            # stdout as text), so `-v 0` turns it off and nginx keeps the access log.
            "json": start_server(
                "json", {**env, "LOG_FORMAT": "json"}, directory, options=DEPLOYED_OPTIONS
            ),
        }
        try:
            prepare_database(env, USERNAME, PASSWORD)
            for server in started.values():
                server.wait_ready()
            yield started
        finally:
            for server in started.values():
                server.stop()


def environment(directory: Path, emulator: EmulatorURL) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "PYTEST_"))}
    return env | {
        "DJANGO_SETTINGS_MODULE": "tests.multiprocess.settings",  # a quick password hasher
        "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "logging-tests-only",
        "LLM_BASE_URL": f"{emulator}/numes/api/v1",
        "LLM_API_KEY": "sk-logging",
        "PYTHONUNBUFFERED": "1",
    }


async def refused_generation(server: Server) -> tuple[int, int]:
    """(conversation, generation) of a message whose upstream request was refused, once the
    worker has logged it."""
    user = User(sign_in(server, USERNAME, PASSWORD), database_url="")
    conversation_pk = await user.new_conversation(server, "Hello", REFUSED)
    found = poll(
        lambda: GENERATION_LINE.search(server.log_text()), what="the worker's warning", within=15
    )
    return conversation_pk, int(found[1])


async def test_a_plain_line_is_written_once_with_its_generation(servers: dict[str, Server]) -> None:
    server = servers["plain"]
    conversation_pk, generation_pk = await refused_generation(server)
    log = server.log_text()
    lines = [line for line in log.split("\n") if f"Generation {generation_pk} refused" in line]
    assert len(lines) == 1, log
    assert re.search(
        rf" WARNING chatapp\.streaming\.worker"
        rf" \[generation={generation_pk} conversation={conversation_pk}\]:"
        rf" Generation {generation_pk} refused",
        lines[0],
    ), lines[0]
    # Daphne's own lines pass through the same one handler.
    assert log.count("Listening on TCP address") == 1, log


async def test_json_lines_are_json_objects_with_the_generation(servers: dict[str, Server]) -> None:
    server = servers["json"]
    conversation_pk, generation_pk = await refused_generation(server)
    lines = [orjson.loads(line) for line in server.log_text().split("\n") if line]
    assert all(isinstance(line, dict) for line in lines)
    (warning,) = [
        line for line in lines if line["message"].startswith(f"Generation {generation_pk} ")
    ]
    assert warning["level"] == "WARNING"
    assert warning["logger"] == "chatapp.streaming.worker"
    assert (warning["generation"], warning["conversation"]) == (generation_pk, conversation_pk)
    listening = [line for line in lines if "Listening on TCP address" in line["message"]]
    assert len(listening) == 1
    assert listening[0]["generation"] is None
