"""`python -m deploy.run`, what `make run` serves with: Daphne and the task worker as two real
processes, stopped together, whichever ends first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.processes import free_port, port_open, stop, tail
from tests.waiting import poll

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("run")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "PYTEST_"))}
    env |= {
        "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "run-tests-only",
        "PYTHONPATH": str(ROOT),
    }
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--verbosity", "0"],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=180,
    )
    return env


@pytest.fixture
def running(
    environment: dict[str, str], tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port()
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        runner = subprocess.Popen(
            [sys.executable, "-m", "deploy.run", "--port", str(port)],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        poll(lambda: port_open(port) or runner.poll() is not None, what="Daphne", within=60)
        assert runner.poll() is None, tail(log)
        yield runner, port, log
    finally:
        stop(runner)


def children(pid: int) -> dict[int, str]:
    found = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found[int(child)] = (
            Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        )
    return found


def test_both_start_and_a_stop_stops_both(
    running: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    runner, port, log = running
    started = children(runner.pid)
    assert sorted("run_worker" in c for c in started.values()) == [False, True], started
    assert any("daphne" in c and f"-p {port}" in c for c in started.values()), started

    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=30) == 0, tail(log)
    assert all(not Path(f"/proc/{pid}").exists() for pid in started), started
    assert not port_open(port)


def test_when_the_worker_ends_the_server_is_stopped(
    running: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    runner, port, log = running
    worker = next(pid for pid, c in children(runner.pid).items() if "run_worker" in c)
    os.kill(worker, signal.SIGKILL)
    assert runner.wait(timeout=30) == 1, tail(log)
    assert "worker exited (-9); stopping the rest" in log.read_text()
    # Daphne is stopped; the listening socket can outlive it by a moment in its render pool's
    # processes, which inherited it and end with it (seen once in `make test-quick`).
    poll(lambda: not port_open(port), what="the port to close", within=10)
