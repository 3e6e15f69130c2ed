"""A scripted HTTP/1.1 server on loopback, for what only a real socket shows: drips, stalls,
drops, oversized lines, endless bodies and the moment a client hangs up.

The script is an async function given a `Peer`: it writes raw bytes (chunked encoding helpers
included) and can wait for the client to go away.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class Peer:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    request_head: bytes = b""
    request_body: bytes = b""
    closed_at: float | None = None
    events: list[str] = field(default_factory=list)

    async def head(
        self, status: str = "200 OK", content_type: str = "text/event-stream", extra: str = ""
    ) -> None:
        self.writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Transfer-Encoding: chunked\r\n{extra}\r\n".encode()
        )
        await self.writer.drain()

    async def chunk(self, data: bytes) -> None:
        if data:
            self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def wait_closed_by_client(self) -> float:
        """Block (at most 10 s) until the client hangs up; returns the loop time it was seen."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(10):
            while await self.reader.read(65536):
                pass
        self.closed_at = loop.time()
        return self.closed_at


Script = Callable[[Peer], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(script: Script) -> AsyncIterator[tuple[str, list[Peer]]]:
    """Serve `script` for every connection; yields (base URL, peers seen)."""
    peers: list[Peer] = []
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = Peer(reader, writer)
        peers.append(peer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            peer.request_head = head
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            peer.request_body = await reader.readexactly(length) if length else b""
            await script(peer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def start(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(handle(reader, writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    server = await asyncio.start_server(start, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", peers
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
