"""A level's stack with `--processes N` (N >= 2): the servers as `make cluster` runs them.

PostgreSQL, Redis, N Daphne processes and nginx in front of them, from deploy's own pieces
(`postgres_server`, `redis_server`, `nginx_server`, the Daphne options and environment of
`deploy.cluster`), with the benchmark's emulator as the one gateway (it keeps the record of every
answer). The crowd talks to nginx; the orchestrator reads PostgreSQL and asks each Daphne process
for its counters on its own port, past nginx. Each level gets a fresh PostgreSQL, migrated anew
(seconds, not the file copy of one process's SQLite template).

Daphne runs under `die_with_parent` like every benchmark child; PostgreSQL (pg_ctl detaches it),
Redis and nginx are stopped by deploy's context managers when the level ends.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from deploy.cluster import DAPHNE_ENVIRONMENT, DAPHNE_OPTIONS, PREPARE
from deploy.nginx import nginx_server
from deploy.processes import ServiceError, free_port
from deploy.services import postgres_server, redis_server

from .stack import (
    BIN,
    EmulatorConfig,
    add_accounts,
    app_name,
    server_env,
    spawn,
    start_emulator,
    stop,
    wait_http,
)

_HOST = "127.0.0.1"
PREPARE_TIMEOUT_S = 300


class ClusterStack:
    """The emulator, PostgreSQL, Redis, `processes` Daphne processes and nginx, for one level."""

    def __init__(
        self,
        workdir: Path,
        source: Path,
        emulator: EmulatorConfig,
        processes: int,
        *,
        plain: bool = False,
        accounts: int = 1,
    ) -> None:
        self.dir = workdir
        self.source = source
        self.emulator_config = emulator
        self.processes = processes
        self.plain = plain
        self.accounts = accounts
        self.emulator: subprocess.Popen[bytes] | None = None
        self.servers: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        self.emulator_url = self.base_url = self.database_url = ""
        self._services = contextlib.ExitStack()

    def __enter__(self) -> ClusterStack:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        # As deploy.cluster stops them: nginx, Daphne and the emulator, PostgreSQL, Redis (the
        # children's stop is registered between); again after, for a start that failed earlier.
        try:
            self._services.close()
        finally:
            self._stop_children()

    def _stop_children(self) -> None:
        stop(*self.servers, self.emulator)  # together: their shutdowns overlap

    def _start(self) -> None:
        self.emulator, emulator_port = start_emulator(self.dir, self.emulator_config, self.source)
        self.emulator_url = f"http://{_HOST}:{emulator_port}"
        redis_url = self._services.enter_context(redis_server())
        self.database_url = self._services.enter_context(postgres_server())
        self._services.callback(self._stop_children)
        # nginx's workers (as root: www-data) read the static files and write their temp files
        # here, and must pass through the run's directory to reach them.
        self.dir.parent.chmod(0o755)
        self.dir.chmod(0o755)
        static_root = self.dir / "static"
        env = server_env(self.dir / "unused.sqlite3", emulator_port, self.source)
        env.update(
            DATABASE_URL=self.database_url,
            REDIS_URL=redis_url,
            DJANGO_STATIC_ROOT=str(static_root),
            CHAT_TRUSTED_PROXIES="1",  # nginx
        )
        self._prepare(env)
        app = app_name(plain=self.plain)
        self.ports = [free_port() for _ in range(self.processes)]
        for number, port in enumerate(self.ports, start=1):
            args = [str(BIN / "daphne"), "-b", _HOST, "-p", str(port), *DAPHNE_OPTIONS, app]
            log = self.dir / f"daphne-{number}.log"
            self.servers.append(spawn(args, DAPHNE_ENVIRONMENT | env, log, self.source))
        for number, (server, port) in enumerate(zip(self.servers, self.ports, strict=True), 1):
            wait_http(
                f"http://{_HOST}:{port}/accounts/login/", server, self.dir / f"daphne-{number}.log"
            )
        nginx_port = free_port()
        nginx = self._services.enter_context(
            nginx_server(self.dir, nginx_port, self.ports, static_root)
        )
        self.base_url = f"http://{_HOST}:{nginx_port}"
        wait_http(self.base_url + "/accounts/login/", nginx, self.dir / "nginx-error.log")

    def _prepare(self, env: dict[str, str]) -> None:
        """The schema, the static files and the benchmark's account, as `make cluster` does."""
        result = subprocess.run(
            [sys.executable, "manage.py", "shell", "--no-imports", "-c", PREPARE],
            cwd=self.source, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=PREPARE_TIMEOUT_S, check=False,
        )  # fmt: skip
        if result.returncode:
            raise ServiceError(f"migrate / collectstatic failed:\n{result.stdout}{result.stderr}")
        add_accounts(self.source, env, self.accounts)

    @property
    def server_pids(self) -> dict[str, int]:
        return {f"server-{n}": server.pid for n, server in enumerate(self.servers, start=1)}

    @property
    def server_pid(self) -> int:
        return self.servers[0].pid

    @property
    def database(self) -> str:
        return self.database_url

    @property
    def stats_urls(self) -> list[str]:
        return [] if self.plain else [f"http://{_HOST}:{port}/__bench__/db" for port in self.ports]

    @property
    def pids(self) -> dict[str, int]:
        assert self.emulator is not None
        return {**self.server_pids, "emulator": self.emulator.pid}
