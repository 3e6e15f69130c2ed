"""Daphne server processes, and a signed-in user's view of them: HTTP, websockets, the database.

Each server is started exactly as `make run` starts one (`daphne chatapp.asgi:application`), in
its own process, with the shared `DATABASE_URL` and `REDIS_URL`. The test talks to them only as a
browser would (session cookie, CSRF token, a real websocket with an `Origin`), and reads the
database directly to compare what the sockets saw with what was stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import orjson
import psycopg
from psycopg.rows import dict_row
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Origin

from chatapp.messaging import socket_messages
from chatapp.ws import page_model
from deploy import processes
from deploy.processes import free_port
from tests.static_root import collected_static_root

ROOT = Path(__file__).resolve().parents[2]
DAPHNE = str(Path(sys.executable).parent / "daphne")


class Endpoint(Protocol):
    """Where a browser's requests go: one server, or a proxy in front of several."""

    @property
    def url(self) -> str: ...

    @property
    def port(self) -> int: ...


@dataclass
class Server:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = processes.START_TIMEOUT) -> None:
        processes.wait_for_port(
            f"daphne {self.name}", self.port, self.process, log=self.log_text, timeout=timeout
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as when the machine or the OOM killer ends it."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        processes.stop(self.process)


def start_server(
    name: str, env: dict[str, str], directory: Path, *, options: Sequence[str] = ()
) -> Server:
    """Start Daphne in the background (with Daphne's `options` if any); call `wait_ready`
    (start several first, then wait). Tests pick the emulator's pacing per request
    (`emulator/long?long_tokens=50`): the server lets them unless `env` says otherwise."""
    port = free_port()
    log = directory / f"daphne-{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [DAPHNE, "-b", "127.0.0.1", "-p", str(port), *options, "chatapp.asgi:application"],
            env={
                "CHAT_EMULATOR_REQUEST_OPTIONS": "1",
                "DJANGO_STATIC_ROOT": str(collected_static_root()),
                **env,
            },
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Server(name, port, process, log)


def prepare_database(env: dict[str, str], username: str, password: str) -> None:
    """Migrate and add a superuser, in one process (each Django start costs a second or two)."""
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', interactive=False, verbosity=0)\n"
        f"get_user_model().objects.create_superuser({username!r}, '', {password!r})\n"
    )
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", script],
        env=env,
        cwd=ROOT,
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        timeout=120,
    )


def add_user(database_url: str, username: str, password: str) -> int:
    """A user of a test's own, in the servers' database, with the MD5 hasher the servers use (the
    suite's user is shared: its answers count in its per-minute limit in every later test)."""
    salt = "own-user"
    digest = hashlib.md5((salt + password).encode()).hexdigest()
    with psycopg.connect(database_url, autocommit=True) as db:
        row = db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name,"
            " email, is_staff, is_active, date_joined)"
            " VALUES (%s, false, %s, '', '', '', false, true, now()) RETURNING id",
            [f"md5${salt}${digest}", username],
        ).fetchone()
    assert row is not None
    return int(row[0])


def sign_in(server: Endpoint, username: str, password: str) -> dict[str, str]:
    """The session and CSRF cookies of a real sign-in through the login form."""
    with httpx.Client(base_url=server.url, timeout=10) as http:
        page = http.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None, page.text[:500]
        form = {"username": username, "password": password, "csrfmiddlewaretoken": token[1]}
        response = http.post("/accounts/login/", data=form)
        assert response.status_code == 302, response.text[:500]
        return dict(http.cookies.items())


@dataclass
class Stream:
    """What one websocket received for one generation, applied by the page's model
    (`chatapp.ws.page_model`, the twin of `static/chatapp/stream_state.js`), with a record: the
    deltas and snapshots as they came, the duplicates dropped and the gaps held, and the
    requests the page would send back. A socket that joined mid-stream (`joined_mid_stream`) has
    no page render to start from: it holds deltas back until its first snapshot."""

    generation_pk: int
    joined_mid_stream: bool = False
    state: page_model.StreamState = field(init=False)
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    deltas: list[dict[str, Any]] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    """What the page sends back (snapshot requests, on a gap), for `follow` to send."""
    done: dict[str, Any] | None = None
    arrived: dict[int, float] = field(default_factory=dict)
    """When each delta reached the socket (`time.monotonic()`), by seq."""
    _before_snapshot: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = page_model.start(self.generation_pk)

    @property
    def seq(self) -> int:
        return self.state.seq

    @property
    def content(self) -> str:
        return self.state.content

    def apply(self, message: dict[str, Any], at: float) -> None:
        match message["t"]:
            case "delta":
                self.deltas.append(message)
                self.arrived.setdefault(message["seq"], at)
                if self.joined_mid_stream and not self.snapshots:
                    self._before_snapshot.append(message)
                    return
            case "snapshot":
                self.snapshots.append(message)
        self._step(message, at)
        if message["t"] == "snapshot":
            held, self._before_snapshot = self._before_snapshot, []
            for delta in held:
                self._step(delta, at)

    def _step(self, message: dict[str, Any], at: float) -> None:
        before = self.state
        if message["t"] == "delta" and not before.done:
            if message["seq"] <= before.seq:
                self.duplicates.append(message["seq"])
            elif message["seq"] > before.seq + 1 and message["seq"] not in before.held:
                self.gaps.append((before.seq, message["seq"]))
        self._carry_out(page_model.receive(before, message, at * 1000))

    def check_after_watch(self, asked: float, now: float) -> None:
        """The page's check a while after its watch (chat.js `onWatched`): an answer no
        snapshot covered since asks for one (`time.monotonic()` seconds)."""
        self._carry_out(page_model.after_watch(self.state, asked * 1000, now * 1000))

    def _carry_out(self, step: page_model.Step) -> None:
        self.state = step.state
        for effect in step.effects:
            match effect:
                case page_model.Append(delta=delta):
                    self.applied.append(delta["seq"])
                case page_model.Send(message=request):
                    self.requests.append(request)
                case page_model.Finish(done=done):
                    self.done = dict(done)


WATCH_CHECK_S = 1.0  # static/chatapp/socket.js WATCH_CHECK_MS


class Socket:
    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.received: list[tuple[float, dict[str, Any]]] = []
        # The user's spend, pushed to every tab whenever one of their costs settles (a cost from
        # an earlier test's answer too): the page's, not a reply to anything this socket sent.
        self.spend_pushes: list[dict[str, Any]] = []
        self._unread: list[dict[str, Any]] = []  # the rest of a frame of several deltas
        self.watched_at: float | None = None  # when the page's watch was sent (monotonic)

    async def send(self, message: dict[str, Any]) -> None:
        await self.connection.send(orjson.dumps(message).decode())

    async def next(self, within: float) -> dict[str, Any]:
        """The next message about what this socket watches or asked (spend pushes kept apart)."""
        async with asyncio.timeout(within):
            while True:
                if not self._unread:
                    self._unread = socket_messages.decode_frame(await self.connection.recv())
                message = self._unread.pop(0)
                if message.get("t") != "spend":
                    break
                self.spend_pushes.append(message)
        self.received.append((time.monotonic(), message))
        return message

    async def watched(self, conversation_pk: int, *, within: float) -> None:
        """Until the server says this socket watches the conversation."""
        async with asyncio.timeout(within):
            while (await self.next(within)) != {"t": "watching", "c": conversation_pk}:
                pass

    async def follow(
        self,
        generation_pk: int,
        *,
        within: float,
        until: str = "done",
        joined_mid_stream: bool = False,
    ) -> Stream:
        """Apply this generation's messages (all received so far, then new ones) until one of
        type `until` arrives."""
        stream = Stream(generation_pk, joined_mid_stream=joined_mid_stream)
        for at, message in self.received:
            if message.get("g") == generation_pk:
                stream.apply(message, at)
        # A page that opened on the answer checks a while after its watch, as chat.js does: the
        # answer may have ended (a sweep's `done` sent) before this socket joined its group.
        check_at = None
        if joined_mid_stream and self.watched_at is not None:
            check_at = self.watched_at + WATCH_CHECK_S
        async with asyncio.timeout(within):
            while True:
                for request in stream.requests:
                    await self.send(request)  # as the page does
                stream.requests.clear()
                if stream.done if until == "done" else _seen(stream, until):
                    return stream
                if check_at is not None and self.watched_at is not None:
                    try:
                        message = await self.next(max(0.0, check_at - time.monotonic()))
                    except TimeoutError:
                        stream.check_after_watch(self.watched_at, time.monotonic())
                        check_at = None
                        continue
                else:
                    message = await self.next(within)
                if message.get("g") == generation_pk:
                    stream.apply(message, self.received[-1][0])


def _seen(stream: Stream, kind: str) -> bool:
    return bool(stream.deltas if kind == "delta" else stream.snapshots)


class User:
    """A signed-in user: the same cookies work on every server (sessions live in PostgreSQL)."""

    def __init__(self, cookies: dict[str, str], database_url: str) -> None:
        self.cookies = cookies
        self.database_url = database_url

    def http(self, server: Endpoint) -> httpx.AsyncClient:
        """A client signed in as this user (use it as an `async with` block)."""
        return httpx.AsyncClient(
            base_url=server.url,
            cookies=self.cookies,
            headers={"X-CSRFToken": self.cookies["csrftoken"]},
            timeout=10,
        )

    async def get(self, server: Endpoint, path: str) -> httpx.Response:
        async with self.http(server) as http:
            return await http.get(path)

    async def post(
        self, server: Endpoint, path: str, data: dict[str, str] | None = None
    ) -> httpx.Response:
        async with self.http(server) as http:
            return await http.post(path, data=data or {})

    async def new_conversation(self, server: Endpoint, text: str, model: str) -> int:
        response = await self.post(server, "/c/new/send/", {"content": text, "model": model})
        assert response.status_code == 302, response.text[:500]
        match = re.fullmatch(r"/c/(\d+)/", response.headers["location"])
        assert match is not None, response.headers["location"]
        return int(match[1])

    async def send(self, server: Endpoint, conversation_pk: int, text: str, model: str) -> int:
        """Send a message through `server`; the id of the generation it started."""
        response = await self.post(
            server, f"/c/{conversation_pk}/send/", {"content": text, "model": model}
        )
        assert response.status_code == 200, response.text[:500]
        found = re.findall(r'data-generation="(\d+)"', response.text)
        assert found, response.text[:500]
        return int(found[-1])

    @asynccontextmanager
    async def socket(self, server: Endpoint, conversation_pk: int) -> AsyncIterator[Socket]:
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        async with connect(
            f"ws://127.0.0.1:{server.port}/ws/chat/",
            origin=Origin(server.url),
            additional_headers={"Cookie": cookie},
            open_timeout=10,
        ) as connection:
            socket = Socket(connection)
            await socket.send({"t": "watch", "c": conversation_pk})  # as the page does on open
            socket.watched_at = time.monotonic()
            await socket.watched(conversation_pk, within=10)
            yield socket

    # --- The database, read directly -------------------------------------------------------------

    async def generation(self, generation_pk: int) -> dict[str, Any]:
        async with await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, row_factory=dict_row
        ) as db:
            cursor = await db.execute(
                "SELECT g.*, m.content FROM chatapp_generation g"
                " JOIN chatapp_message m ON m.id = g.message_id WHERE g.id = %s",
                [generation_pk],
            )
            row = await cursor.fetchone()
        assert row is not None, f"no generation {generation_pk}"
        return row

    async def latest_generation(self, conversation_pk: int) -> int:
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as db:
            cursor = await db.execute(
                "SELECT max(id) FROM chatapp_generation WHERE conversation_id = %s",
                [conversation_pk],
            )
            row = await cursor.fetchone()
        assert row is not None
        assert row[0] is not None, f"conversation {conversation_pk} is empty"
        return int(row[0])

    async def wait_idle(self, conversation_pk: int, *, within: float = 30) -> None:
        """Until no generation of the conversation is streaming. `within` bounds a hang, not a
        speed: a short answer took over 10 s while parallel test workers shared two cores (a
        server's first render process starting at nice 10), and it returns as soon as it holds."""
        deadline = time.monotonic() + within
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as db:
            while True:
                cursor = await db.execute(
                    "SELECT count(*) FROM chatapp_generation"
                    " WHERE conversation_id = %s AND status = 'streaming'",
                    [conversation_pk],
                )
                row = await cursor.fetchone()
                if row is not None and row[0] == 0:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(f"conversation {conversation_pk} is still streaming")
                await asyncio.sleep(0.05)

    async def wait_generation(
        self,
        generation_pk: int,
        *,
        within: float,
        until: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """Poll the generation until `until(row)` (default: it reached a terminal state)."""
        ready = until or (lambda row: row["status"] != "streaming")
        deadline = time.monotonic() + within
        while True:
            row = await self.generation(generation_pk)
            if ready(row):
                return row
            if time.monotonic() > deadline:
                raise AssertionError(f"generation {generation_pk} stayed as {row}")
            await asyncio.sleep(0.05)
