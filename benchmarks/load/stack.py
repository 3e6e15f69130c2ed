"""Start and stop the benchmark's servers: the emulator and one Daphne process of the app.

Every process is a child started here, on 127.0.0.1, with its output in the run's directory, and
is stopped in `finally` whatever happens, as `make cluster` and the multi-process tests stop
theirs (`deploy.processes`: SIGTERM, then SIGKILL after a grace period, several together); the
kernel also kills children if this process dies first (`PR_SET_PDEATHSIG`), so a killed run
leaves nothing behind. Each level
gets a fresh database: a copy of a template migrated once per run (with the admin account), which
costs a file copy instead of a `migrate`.

The app (and the emulator, so a run is one consistent version) runs from `source`: this checkout,
or a git revision exported with `export_revision`, so "before" figures can be taken from a commit
while the working tree is being changed. The benchmark's own modules always come from this
checkout (`ROOT`, second on `PYTHONPATH`).
"""

from __future__ import annotations

import ctypes
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from deploy import processes
from deploy.processes import free_port, tail

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
USERNAME, PASSWORD = "bench", "bench-password-not-secret"
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
BENCH_GENERATIONS_PER_MINUTE = 1_000_000
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_HOST = "127.0.0.1"


def die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(args: list[str], env: dict[str, str], log: Path, source: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            args,
            cwd=source,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Spawned from the main thread: the death signal follows the thread that forked.
            preexec_fn=die_with_parent,
        )


def stop(*running: subprocess.Popen[Any] | None) -> None:
    """Stop the children given (None: not started), together (`deploy.processes.stop`)."""
    processes.stop(*(process for process in running if process is not None), grace=STOP_GRACE_S)


def wait_http(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until `url` answers below 500 (`deploy.processes.wait_for_port`, whose error has the
    log's tail): a port that accepts is not yet an app that answers."""
    with httpx.Client(trust_env=False, timeout=2) as client:

        def answers(_: int) -> bool:
            try:
                return client.get(url).status_code < 500
            except httpx.TransportError:
                return False

        processes.wait_for_port(
            log.stem,
            httpx.URL(url).port or 80,
            process,
            log=lambda: tail(log),
            timeout=START_TIMEOUT_S,
            ready=answers,
        )


APP_PATHS = ("chatapp", "gateway_client", "templates", "static", "manage.py")


def export_revision(revision: str, dest: Path) -> str:
    """The app's files at `revision` into `dest`; the full commit hash."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", revision + "^{commit}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *APP_PATHS],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return commit


def child_env(source: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{source}{os.pathsep}{ROOT}", PYTHONUNBUFFERED="1")


def app_name(*, plain: bool) -> str:
    return "chatapp.asgi:application" if plain else "benchmarks.load.instrumented_app:application"


def server_env(db: Path, emulator_port: int, source: Path) -> dict[str, str]:
    """The app's settings, from the environment as docs/configuration.md documents them; nothing
    else of the caller's environment that could point the app elsewhere (Redis, another gateway)."""
    env = {
        k: v
        for k, v in child_env(source).items()
        if not k.startswith(("LLM_", "REDIS_", "DATABASE_", "DJANGO_", "CHAT_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="chatapp.settings",
        DATABASE_URL=f"sqlite:///{db}",
        LLM_BASE_URL=f"http://{_HOST}:{emulator_port}/numes/api/v1",
        LLM_API_KEY="benchmark",
        DJANGO_SECRET_KEY="load-benchmark-" + "x" * 40,
        ALLOWED_HOSTS=_HOST,
        DJANGO_SUPERUSER_USERNAME=USERNAME,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        CHAT_LOG_LEVEL="WARNING",
        # Every tab is the one account's: the per-user limit (30 a minute) would refuse most of
        # a crowd, so the benchmark has a limit of its own, above any level it runs.
        CHAT_GENERATIONS_PER_MINUTE=str(BENCH_GENERATIONS_PER_MINUTE),
    )
    return env


def usernames(accounts: int) -> list[str]:
    """The accounts the crowd's browsers sign in as: `ensure_admin`'s, then `add_accounts`'."""
    return [USERNAME, *(f"{USERNAME}-{n}" for n in range(2, accounts + 1))]


# Every account but the first (`ensure_admin` makes it) with the one password, hashed once.
ADD_ACCOUNTS = """
import os
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
User = get_user_model()
hashed = make_password(os.environ["BENCH_PASSWORD"])
names = os.environ["BENCH_ACCOUNTS"].split(",")
User.objects.bulk_create([User(username=name, password=hashed) for name in names])
"""


def add_accounts(source: Path, env: dict[str, str], accounts: int) -> None:
    """`usernames(accounts)` beyond the first, in the database `env` names."""
    names = ",".join(usernames(accounts)[1:])
    if not names:
        return
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", ADD_ACCOUNTS],
        cwd=source, env=env | {"BENCH_ACCOUNTS": names, "BENCH_PASSWORD": PASSWORD},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if result.returncode:
        raise RuntimeError(f"adding the accounts failed:\n{result.stdout}{result.stderr}")


def prepare_template(workdir: Path, source: Path, accounts: int = 1) -> Path:
    """`manage.py migrate` and `ensure_admin` into a database every level copies, the crowd's
    other accounts, and the static files collected, as `make run` does (the server refuses to
    start without them)."""
    template = workdir / "template.sqlite3"
    env = server_env(template, 9, source)
    for command in (
        ["migrate", "--noinput", "-v", "0"],
        ["ensure_admin"],
        ["collectstatic", "--noinput", "-v", "0"],
    ):
        result = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=source,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode:
            raise RuntimeError(f"manage.py {command[0]} failed:\n{result.stdout}{result.stderr}")
    add_accounts(source, env, accounts)
    return template


@dataclass(frozen=True, slots=True)
class EmulatorConfig:
    tokens_per_second: float
    ttft_ms: int
    long_tokens: int


def start_emulator(
    workdir: Path, config: EmulatorConfig, source: Path
) -> tuple[subprocess.Popen[bytes], int]:
    """The benchmark's emulator (it keeps a record of every answer), once it answers; its port."""
    port = free_port()
    log = workdir / "emulator.log"
    process = spawn(
        [
            sys.executable,
            "-m",
            "benchmarks.load.emulator_app",
            f"--port={port}",
            f"--tokens-per-second={config.tokens_per_second}",
            f"--ttft-ms={config.ttft_ms}",
            f"--long-tokens={config.long_tokens}",
        ],
        child_env(source),
        log,
        source,
    )
    try:
        wait_http(f"http://{_HOST}:{port}/", process, log)
    except BaseException:
        stop(process)
        raise
    return process, port


class Stack:
    """The emulator and one Daphne process on a fresh database, for one level."""

    def __init__(
        self,
        workdir: Path,
        source: Path,
        template: Path,
        emulator: EmulatorConfig,
        *,
        plain: bool = False,
    ) -> None:
        self.dir = workdir
        self.source = source
        self.db = workdir / "db.sqlite3"
        shutil.copyfile(template, self.db)
        self.emulator_config = emulator
        self.plain = plain
        self.emulator: subprocess.Popen[bytes] | None = None
        self.server: subprocess.Popen[bytes] | None = None
        self.emulator_url = self.base_url = ""

    def __enter__(self) -> Stack:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.server, self.emulator)

    def _start(self) -> None:
        self.emulator, port = start_emulator(self.dir, self.emulator_config, self.source)
        self.emulator_url = f"http://{_HOST}:{port}"
        app = app_name(plain=self.plain)
        server_port = free_port()
        self.base_url = f"http://{_HOST}:{server_port}"
        log = self.dir / "daphne.log"
        args = [str(BIN / "daphne"), "-b", _HOST, "-p", str(server_port), app]
        self.server = spawn(args, server_env(self.db, port, self.source), log, self.source)
        wait_http(self.base_url + "/accounts/login/", self.server, log)

    @property
    def server_pid(self) -> int:
        assert self.server is not None
        return self.server.pid

    @property
    def server_pids(self) -> dict[str, int]:
        """The Daphne processes by name: one here, "server-1"... in a `ClusterStack`."""
        return {"server": self.server_pid}

    @property
    def database(self) -> Path:
        return self.db

    @property
    def stats_urls(self) -> list[str]:
        """Where each Daphne process answers its statement counters (none with `--plain`)."""
        return [] if self.plain else [self.base_url + "/__bench__/db"]

    @property
    def pids(self) -> dict[str, int]:
        assert self.server is not None
        assert self.emulator is not None
        return {"server": self.server.pid, "emulator": self.emulator.pid}


def proc_status_kb(pid: int, field: str) -> int | None:
    """`VmRSS` or `VmHWM` of `pid`, in kB, from /proc (psutil is not installed)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of `pid` (its threads included), from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def children(pid: int) -> list[int]:
    """`pid`'s child processes (the render pool's, for a Daphne process), from /proc."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
    except OSError:
        pass
    return found


def machine_busy_seconds() -> float:
    """CPU time processes used since boot, all CPUs (/proc/stat `user + nice + system`): the
    kernel's interrupt work (loopback networking, mostly ours) is left out, being no process's."""
    with open("/proc/stat") as stat:
        user, nice, system = (int(x) for x in stat.readline().split()[1:4])
    return (user + nice + system) / _TICKS
