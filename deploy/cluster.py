"""`make cluster`: the multi-process setup on loopback, started and stopped as one.

PostgreSQL, Redis, Chroma (knowledge collections' vectors), a gateway emulator (unless
`LLM_BASE_URL` names a gateway), N Daphne processes and nginx in front of them, and the task
worker (`manage.py run_worker`: knowledge files' indexing), each a private instance in one
temporary directory that is deleted on exit, so nothing is kept (it shows the setup; it is not
where to keep conversations). Every process gets the settings a real host
gives it (docs/deployment.md, "Running in production"): the same `DATABASE_URL`, `REDIS_URL`,
`CHAT_CHROMA_URL`, `DJANGO_SECRET_KEY` and gateway.

Each child runs in a session of its own, so a Ctrl-C in the terminal reaches only this process,
which then stops them in order (nginx; Daphne, the worker and the emulator; Chroma; PostgreSQL;
Redis) instead of all of them dying at once. `cluster.json` in the directory lists the URL, the
services' URLs and the main PIDs (PostgreSQL's too, which pg_ctl detached from this process's
tree).

    python -m deploy.cluster [--port 8080] [--processes 2]
"""

from __future__ import annotations

import argparse
import collections
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import orjson
import psycopg

from gateway_client import emulator

from .nginx import nginx_server
from .processes import ServiceError, free_port, stop, wait_for_port
from .services import chroma_server, postgres_server, redis_server

__all__ = ["ClusterOptions", "RunningCluster", "cluster", "main"]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Daphne's access log is text written to stdout, not log records (neither the app's format nor
# JSON): off, as nginx keeps one. The app's own log level is LOG_LEVEL's (settings.LOGGING).
# No --proxy-headers: the app reads the client's address from the X-Forwarded-For entry nginx
# wrote (CHAT_TRUSTED_PROXIES=1, below), trusted because Daphne listens on loopback only.
DAPHNE_OPTIONS = ("-v", "0")
# glibc gives threads that allocate at the same time arenas of their own, up to 8 per core, and
# each arena keeps what was freed in it. A Daphne process has dozens of threads (the render
# pool's waiting threads, a new one per request for Django's sync code), so it soon uses every
# arena it may, and its RSS grows with the generations served, the more the more cores the host
# has (docs/deployment.md, "Memory": 345 MB after 1,500 answers with an eight-core host's 64
# arenas, about 230 MB, level, with 2); deploy/systemd/gateway-chat@.service sets the same.
# Defaults: a variable of the caller's environment wins (`MALLOC_ARENA_MAX=16 make cluster` to
# compare).
DAPHNE_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2"}

# One Django start, not three (each costs a second or two): the schema, the static files for
# nginx, and the admin account, whose output is the login printed at the end.
PREPARE = """\
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
call_command("collectstatic", interactive=False, verbosity=0)
call_command("ensure_admin")
"""


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    port: int = 8080
    processes: int = 2


@dataclass(frozen=True, slots=True)
class RunningCluster:
    url: str
    directory: Path
    database_url: str
    redis_url: str
    chroma_url: str
    gateway_url: str
    daphne_ports: tuple[int, ...]
    pids: dict[str, int]
    admin: str
    """What `manage.py ensure_admin` said: the login, with the password if it made one."""


class Child:
    """A process whose output is copied to ours line by line, each line after its name, with
    the last lines kept for the error if it fails to start."""

    _lock = threading.Lock()

    def __init__(self, name: str, args: Sequence[str], env: dict[str, str]) -> None:
        self.name = name
        self.recent: collections.deque[str] = collections.deque(maxlen=40)
        self.process = subprocess.Popen(
            args,
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self._pump = threading.Thread(target=self._copy, args=(self.process.stdout,), daemon=True)
        self._pump.start()

    def _copy(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\r\n")
            self.recent.append(line)
            with self._lock:
                sys.stdout.write(f"{self.name:<9}| {line}\n")
                sys.stdout.flush()

    def log(self) -> str:
        return "\n".join(self.recent)

    def join(self) -> None:
        """Once it has exited: until the last of its output is copied."""
        self._pump.join(5)


def _stop_children(children: list[tuple[Child, int]]) -> None:
    stop(*(child.process for child, _ in children))
    for child, _ in children:
        child.join()


def _prepare(env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", PREPARE],
        env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise ServiceError(f"migrate / collectstatic failed:\n{result.stdout}{result.stderr}")
    return result.stdout.strip()


def _postmaster_pid(database_url: str) -> int | None:
    """PostgreSQL's main process (pg_ctl started it, not us): the parent of our backend, read
    while the connection is open (the backend exits with it)."""
    with psycopg.connect(database_url, autocommit=True) as db:
        found = db.execute("SELECT pg_backend_pid()").fetchone()
        try:
            stat = Path(f"/proc/{found[0] if found else 0}/stat").read_text()
        except OSError:
            return None
    return int(stat.rsplit(")", 1)[1].split()[1])


@contextmanager
def cluster(options: ClusterOptions) -> Iterator[RunningCluster]:
    """Start everything, yield once nginx answers, stop everything when the block ends."""
    directory = Path(tempfile.mkdtemp(prefix="gateway-chat-cluster-"))
    # nginx's workers (as root: www-data) read the static files and write their temp files here.
    directory.chmod(0o755)
    static_root = directory / "static"
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
        redis_url = stack.enter_context(redis_server())
        database_url = stack.enter_context(postgres_server())
        chroma_url, chroma_pid = stack.enter_context(chroma_server())
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "CHAT_CHROMA_URL": chroma_url,  # knowledge collections' vectors
            "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(50),
            "DJANGO_STATIC_ROOT": str(static_root),
            "CHAT_TRUSTED_PROXIES": "1",  # nginx
            "PYTHONUNBUFFERED": "1",
        }
        children: list[tuple[Child, int]] = []  # each with the port it serves on
        # Together: the Daphne processes' shutdowns overlap (and the emulator's, whose streams
        # end as they do).
        stack.callback(_stop_children, children)

        def start(
            name: str, port: int, args: list[str], defaults: dict[str, str] | None = None
        ) -> None:
            # The caller's environment wins, as /etc/gateway-chat/env wins over the unit's.
            children.append((Child(name, args, (defaults or {}) | env), port))

        gateway_url = os.environ.get("LLM_BASE_URL", "")
        if not gateway_url:
            # One emulator for all: each process's own would not know the others' generations.
            port = free_port()
            start(
                "emulator",
                port,
                [sys.executable, "-m", "gateway_client.emulator", "--port", str(port)],
            )
            gateway_url = f"http://127.0.0.1:{port}/numes/api/v1"
            env |= {
                "LLM_BASE_URL": gateway_url,
                "LLM_API_KEY": "sk-cluster",
                "LLM_SPEECH_MODEL": emulator.SPEECH_MODEL,  # Read aloud works as with make run
                "LLM_TRANSCRIPTION_MODEL": emulator.TRANSCRIPTION_MODEL,  # and voice input
                "LLM_EMBEDDING_MODEL": emulator.EMBEDDING_MODEL,  # and knowledge collections
            }
        ports = tuple(free_port() for _ in range(options.processes))
        for number, port in enumerate(ports, start=1):
            # Started before the migrations run, to boot meanwhile: they touch the database
            # only once they are used.
            start(
                f"daphne-{number}",
                port,
                [
                    str(BIN / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    *DAPHNE_OPTIONS,
                    "chatapp.asgi:application",
                ],
                DAPHNE_ENVIRONMENT,
            )
        admin = _prepare(env)
        # The task worker (knowledge files' indexing) once the tables exist: it reads them at
        # once. It serves no port.
        start("worker", 0, [sys.executable, str(ROOT / "manage.py"), "run_worker"])
        for child, port in children:
            if port:
                wait_for_port(child.name, port, child.process, log=child.log)
        pids = {child.name: child.process.pid for child, _ in children}
        nginx = stack.enter_context(nginx_server(directory, options.port, ports, static_root))
        pids["nginx"] = nginx.pid
        pids["chroma"] = chroma_pid
        postmaster = _postmaster_pid(database_url)
        if postmaster is not None:
            pids["postgres"] = postmaster
        running = RunningCluster(
            url=f"http://127.0.0.1:{options.port}",
            directory=directory,
            database_url=database_url,
            redis_url=redis_url,
            chroma_url=chroma_url,
            gateway_url=gateway_url,
            daphne_ports=ports,
            pids=pids,
            admin=admin,
        )
        (directory / "cluster.json").write_bytes(
            orjson.dumps(asdict(running), default=str, option=orjson.OPT_INDENT_2)
        )
        yield running


class _Stop(Exception):
    pass


def _stop_on_signal(signum: int, frame: types.FrameType | None) -> None:
    # Once: a second Ctrl-C must not cut the shutdown short and leave processes behind.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Stop(signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.cluster", description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")))
    parser.add_argument("--processes", type=int, default=2, help="Daphne processes")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, _stop_on_signal)
    signal.signal(signal.SIGTERM, _stop_on_signal)
    started = time.monotonic()
    try:
        with cluster(ClusterOptions(port=args.port, processes=args.processes)) as running:
            ports = ", ".join(str(port) for port in running.daphne_ports)
            print(
                f"\nReady in {time.monotonic() - started:.1f} s: {running.url}/"
                f"  (nginx -> Daphne on {ports}; static files from nginx)\n"
                f"{running.admin}\n"
                f"Logs: {running.directory}/nginx-access.log; state: "
                f"{running.directory}/cluster.json\n"
                "Ctrl-C stops everything.",
                flush=True,
            )
            while all(pid_alive(pid) for pid in running.pids.values()):
                time.sleep(0.5)
            print("A process of the cluster exited; stopping the others.", file=sys.stderr)
            return 1
    except _Stop:
        print("\nStopped.", flush=True)
        return 0
    except ServiceError as exc:
        print(f"The cluster did not start: {exc}", file=sys.stderr)
        return 1


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child that exited but is not reaped yet is a zombie: gone, for this purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
