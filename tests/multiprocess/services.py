"""Private Redis and PostgreSQL servers for the multi-process tests, from Debian's packages.

Each runs on a free loopback port in its own temporary directory, with durability off (nothing
here must survive the session), and is stopped on exit. A missing binary is an error, not a skip:
`make test` installs both. PostgreSQL refuses to run as root, so as root the cluster belongs to
the `postgres` OS user and its commands run through `runuser`.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 30.0


class ServiceError(RuntimeError):
    """A service could not be found or started; the message says what to do."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").split("\n")[-lines:])
    except OSError:
        return "(no log)"


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
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _redis_ping(port):
            if process.poll() is not None:
                raise ServiceError(f"redis-server exited ({process.returncode}):\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise ServiceError(f"redis-server did not answer PING:\n{_tail(log)}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
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
    `postgres://` URL (superuser `postgres`, so test databases can be created too)."""
    bindir = postgres_bindir()
    directory = Path(tempfile.mkdtemp(prefix="gateway-chat-pg-"))
    prefix = _as_cluster_owner(directory)
    data, log = directory / "data", directory / "postgres.log"
    port = free_port()
    started = False
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
        yield f"postgres://postgres@127.0.0.1:{port}/{database}"
    except ServiceError as exc:
        raise ServiceError(f"{exc}\n--- postgres.log ---\n{_tail(log)}") from None
    finally:
        if started:
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate",
                 "-w", "-t", "10"],
                stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False,
            )  # fmt: skip
        shutil.rmtree(directory, ignore_errors=True)
