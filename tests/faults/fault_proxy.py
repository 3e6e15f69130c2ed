"""A TCP fault proxy on loopback: forwards bytes between the app and a server, breaking them on
purpose.

Each accepted connection gets the `Fault` that `plan(n)` returns for it (`n` counts from 0), so a
test can break the first connection and let the retry or the cost lookup through. Faults act on
the reply direction (server to app), counted in bytes from its first byte, HTTP head included:
the request always arrives whole, so the upstream sees a real request and the emulator keeps a
record of it. `Answer` and `Blackhole` never connect upstream: the proxy plays the server.

It is protocol-agnostic on purpose (the same class stands between Daphne and PostgreSQL, where
`outage()` resets every open connection and refuses new ones for a while).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

READ_SIZE = 65536


@dataclass(frozen=True, slots=True)
class Forward:
    """Pass everything through."""


@dataclass(frozen=True, slots=True)
class ResetAt:
    """Forward `offset` bytes of the reply, then reset both sides (TCP RST, no FIN)."""

    offset: int


@dataclass(frozen=True, slots=True)
class TruncateAt:
    """Forward `offset` bytes of the reply, then close both sides cleanly (FIN)."""

    offset: int


@dataclass(frozen=True, slots=True)
class StallAt:
    """Forward `offset` bytes of the reply, then hold the connection open, sending nothing."""

    offset: int


@dataclass(frozen=True, slots=True)
class DripFrom:
    """Forward `offset` bytes of the reply, then the rest one byte every `interval` seconds."""

    offset: int
    interval: float = 0.4


@dataclass(frozen=True, slots=True)
class Corrupt:
    """Replace the bytes right after the `nth` (from 1) `marker` of the reply with `garbage`,
    of the same length, so chunked framing stays intact and only the payload is broken."""

    marker: bytes
    garbage: bytes
    nth: int = 1


@dataclass(frozen=True, slots=True)
class Answer:
    """Do not connect upstream: read the request, send `reply` as it is, and close."""

    reply: bytes


@dataclass(frozen=True, slots=True)
class Blackhole:
    """Accept the connection, read whatever comes, never answer."""


type Fault = Forward | ResetAt | TruncateAt | StallAt | DripFrom | Corrupt | Answer | Blackhole


def http_reply(status: str, content_type: str, body: bytes, extra: str = "") -> bytes:
    """A whole HTTP/1.1 response that closes its connection."""
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


@dataclass
class Connection:
    """One proxied connection: its fault, and how many reply bytes reached the app."""

    fault: Fault
    forwarded: int = 0
    request: bytearray = field(default_factory=bytearray)
    ended: asyncio.Event = field(default_factory=asyncio.Event)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, ConnectionError):
        await writer.wait_closed()


class FaultProxy:
    def __init__(self, target: tuple[str, int], plan: Callable[[int], Fault]) -> None:
        self.target = target
        self.plan = plan
        self.connections: list[Connection] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._refusing = False
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            _reset(writer)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def reset_all(self) -> None:
        """Reset every open connection (both sides)."""
        for writer in list(self._writers):
            _reset(writer)

    @contextlib.asynccontextmanager
    async def outage(self) -> AsyncIterator[None]:
        """While the block runs, the server is unreachable: open connections are reset at once and
        new ones are reset as soon as they are accepted."""
        self._refusing = True
        self.reset_all()
        try:
            yield
        finally:
            self._refusing = False

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            _reset(writer)
            return
        task = asyncio.create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self.plan(len(self.connections)))
        self.connections.append(conn)
        self._writers.add(writer)
        try:
            match conn.fault:
                case Answer(reply=reply):
                    await self._read_request(reader, conn)
                    writer.write(reply)
                    await writer.drain()
                    await _close(writer)
                case Blackhole():
                    while await reader.read(READ_SIZE):
                        pass
                case _:
                    await self._relay(reader, writer, conn)
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            if not writer.is_closing():
                writer.transport.abort()
            conn.ended.set()

    async def _read_request(self, reader: asyncio.StreamReader, conn: Connection) -> None:
        """Read an HTTP request's head and body (enough to answer it)."""
        head = await reader.readuntil(b"\r\n\r\n")
        conn.request += head
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        conn.request += await reader.readexactly(length)

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: Connection
    ) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers.add(up_writer)

        async def requests() -> None:
            while data := await reader.read(READ_SIZE):
                conn.request += data
                up_writer.write(data)
                await up_writer.drain()
            with contextlib.suppress(OSError):
                up_writer.write_eof()

        outbound = asyncio.create_task(requests())
        try:
            await self._replies(up_reader, writer, up_writer, conn)
        finally:
            outbound.cancel()
            await asyncio.gather(outbound, return_exceptions=True)
            self._writers.discard(up_writer)
            up_writer.transport.abort()

    async def _replies(
        self,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_writer: asyncio.StreamWriter,
        conn: Connection,
    ) -> None:
        fault = conn.fault
        limit = (
            fault.offset if isinstance(fault, ResetAt | TruncateAt | StallAt | DripFrom) else None
        )
        seen = bytearray()  # the reply so far, for `Corrupt` to find its marker in
        held = 0  # how much of `seen` is held back until the marker's bytes have all arrived
        corrupting = isinstance(fault, Corrupt)
        while True:
            data = await up_reader.read(READ_SIZE)
            if not data:
                await self._send(writer, bytes(seen[len(seen) - held :]), conn)
                await _close(writer)
                return
            if corrupting:
                assert isinstance(fault, Corrupt)
                seen += data
                held += len(data)
                at = _nth(seen, fault.marker, fault.nth)
                end = None if at is None else at + len(fault.marker) + len(fault.garbage)
                if end is None or end > len(seen):
                    continue
                begin = end - len(fault.garbage)
                seen[begin:end] = fault.garbage
                data = bytes(seen[len(seen) - held :])
                held = 0
                corrupting = False
            if limit is not None and conn.forwarded + len(data) >= limit:
                await self._send(writer, data[: limit - conn.forwarded], conn)
                await self._break(fault, data[limit - conn.forwarded :], up_reader, writer, conn)
                return
            await self._send(writer, data, conn)

    async def _send(self, writer: asyncio.StreamWriter, data: bytes, conn: Connection) -> None:
        if data:
            writer.write(data)
            await writer.drain()
            conn.forwarded += len(data)

    async def _break(
        self,
        fault: Fault,
        rest: bytes,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: Connection,
    ) -> None:
        match fault:
            case ResetAt():
                _reset(writer)
            case TruncateAt():
                await _close(writer)
            case StallAt():
                await asyncio.Event().wait()  # until the app hangs up or the proxy stops
            case DripFrom(interval=interval):
                pending = bytearray(rest)
                while True:
                    while not pending:
                        more = await up_reader.read(READ_SIZE)
                        if not more:
                            await _close(writer)
                            return
                        pending += more
                    await self._send(writer, bytes(pending[:1]), conn)
                    del pending[:1]
                    await asyncio.sleep(interval)  # the fault itself: one byte per interval


def _nth(data: bytearray, marker: bytes, nth: int) -> int | None:
    at = -1
    for _ in range(nth):
        at = data.find(marker, at + 1)
        if at < 0:
            return None
    return at


@contextlib.asynccontextmanager
async def fault_proxy(
    target: tuple[str, int], plan: Callable[[int], Fault] | Fault
) -> AsyncIterator[FaultProxy]:
    """A running proxy to `target`; `plan` is one fault for every connection, or one per index."""
    proxy = FaultProxy(target, plan if callable(plan) else (lambda _n: plan))
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
