"""Private Redis and PostgreSQL servers from Debian's packages, and a Chroma server from its own
virtualenv (`make chroma`), for the cluster and the tests.

Each runs on a free loopback port in its own temporary directory, with durability off (nothing
here must survive: the cluster is a demonstration, the tests throw theirs away), and is stopped
on exit. A missing binary is an error that names the make target installing it. PostgreSQL
refuses to run as root, so as root the cluster belongs to the `postgres` OS user and its
commands run through `runuser`.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .processes import START_TIMEOUT, ServiceError, free_port, stop, tail, wait_for_port

__all__ = [
    "chroma_binary",
    "chroma_server",
    "postgres_bindir",
    "postgres_server",
    "redis_server",
    "redis_server_binary",
]

# --- Redis ----------------------------------------------------------------------------------------


def redis_server_binary() -> str:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        raise ServiceError("redis-server is not installed: run `make test-packages` (Debian).")
    return found


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway `redis-server` (no RDB, no AOF); yields its `redis://` URL."""
    binary = redis_server_binary()
    directory = Path(tempfile.mkdtemp(prefix="gateway-chat-redis-"))
    port = free_port()
    log = directory / "redis.log"
    args = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(directory),
        "--logfile", str(log),
        "--daemonize", "no",
    ]  # fmt: skip
    # Its own session: a Ctrl-C in the terminal reaches only whoever started it, which stops it
    # in its turn.
    process = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_for_port("redis-server", port, process, log=lambda: tail(log), ready=_redis_ping)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(process)
        shutil.rmtree(directory, ignore_errors=True)


# --- PostgreSQL -----------------------------------------------------------------------------------


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.parent.parent.name)) or (0,)


def postgres_bindir() -> Path:
    """Debian keeps the server binaries off PATH, under /usr/lib/postgresql/VERSION/bin."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=_version_key)
    if candidates:
        return candidates[-1].parent
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    raise ServiceError("PostgreSQL's server is not installed: run `make test-packages` (Debian).")


def _as_cluster_owner(directory: Path) -> list[str]:
    """The command prefix that runs PostgreSQL's tools as a user it accepts."""
    if os.geteuid() != 0:
        return []
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        raise ServiceError(
            "running as root needs the `postgres` OS user (Debian's postgresql package creates it)"
        ) from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ServiceError("running as root needs `runuser` (util-linux) to start PostgreSQL")
    os.chown(directory, owner.pw_uid, owner.pw_gid)
    return [runuser, "-u", "postgres", "--"]


def _run(args: list[str], what: str) -> None:
    result = subprocess.run(
        args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=START_TIMEOUT
    )
    if result.returncode != 0:
        raise ServiceError(f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}")


@contextmanager
def postgres_server(database: str = "chat") -> Iterator[str]:
    """A throwaway PostgreSQL cluster (trust auth, fsync off) with `database` in it; yields its
    `postgres://` URL (superuser `postgres`, so test databases can be created too). pg_ctl
    starts the server in a session of its own, so a Ctrl-C meant for its owner never reaches it."""
    bindir = postgres_bindir()
    directory = Path(tempfile.mkdtemp(prefix="gateway-chat-pg-"))
    prefix = _as_cluster_owner(directory)
    data, log = directory / "data", directory / "postgres.log"
    port = free_port()
    started = False
    try:
        try:
            _run(
                [*prefix, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                 "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"],
                "initdb",
            )  # fmt: skip
            options = (
                f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={directory}"
                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            )
            _run(
                [*prefix, str(bindir / "pg_ctl"), "start", "-D", str(data), "-l", str(log),
                 "-o", options, "-w", "-t", str(int(START_TIMEOUT))],
                "pg_ctl start",
            )  # fmt: skip
            started = True
            _run(
                [*prefix, str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port),
                 "-U", "postgres", database],
                "createdb",
            )  # fmt: skip
        except ServiceError as exc:
            raise ServiceError(f"{exc}\n--- postgres.log ---\n{tail(log)}") from None
        yield f"postgres://postgres@127.0.0.1:{port}/{database}"
    finally:
        if started:
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate",
                 "-w", "-t", "10"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False,
            )  # fmt: skip
        shutil.rmtree(directory, ignore_errors=True)


# --- Chroma ---------------------------------------------------------------------------------------

CHROMA = Path(__file__).resolve().parent.parent / ".venv-chroma" / "bin" / "chroma"


def chroma_binary() -> Path:
    """`chroma` from its own virtualenv (`make chroma`); `ServiceError` naming it when missing."""
    if not CHROMA.exists():
        raise ServiceError(f"Chroma is not installed in {CHROMA.parent.parent}: run `make chroma`.")
    return CHROMA


def _chroma_beats(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"GET /api/v2/heartbeat HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return b" 200 " in sock.recv(32)
    except OSError:
        return False


@contextmanager
def chroma_server() -> Iterator[tuple[str, int]]:
    """A throwaway Chroma server (`chroma run`) on loopback; yields its URL and its PID."""
    binary = chroma_binary()
    directory = Path(tempfile.mkdtemp(prefix="gateway-chat-chroma-"))
    port = free_port()
    log = directory / "chroma.log"
    args = [str(binary), "run", "--path", str(directory / "data"), "--host", "127.0.0.1",
            "--port", str(port)]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # No usage reports from a throwaway server.
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
    try:
        wait_for_port("chroma", port, process, log=lambda: tail(log), ready=_chroma_beats)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop(process)
        shutil.rmtree(directory, ignore_errors=True)
