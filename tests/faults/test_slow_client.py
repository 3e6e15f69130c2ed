"""A browser that stops reading its websocket: the server's memory for it stays bounded.

Daphne writes every frame to the socket's Twisted transport, which keeps what the kernel will not
take without limit (`chatapp/patches/daphne_websockets.py`). The silent clients here open a real
websocket
with a tiny receive buffer, watch the conversation, and then never read again; a normal page
watches beside them. The answer streams on; each silent socket is closed once its backlog passes
`CHAT_WS_MAX_BUFFERED` (64 KB on these servers), and the server's memory does not grow with
what they were sent.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import subprocess
from pathlib import Path

import orjson
import pytest

from chatapp.patches.daphne_websockets import CLOSE_TOO_SLOW
from tests.multiprocess.servers import Server, User

from .browser_model import ShownAnswer
from .cluster import WS_MAX_BUFFERED, log_excerpt, no_tracebacks
from .pages import follow_page

pytestmark = pytest.mark.multiprocess

FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
BIG = "emulator/long?tokens_per_second=6000&long_tokens=24000"  # about 4 s, 1.5 MB of frames
SILENT = 6
RECEIVE_BUFFER = 4096


class SilentSocket:
    """A websocket client that reads the handshake and one reply, then nothing at all."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @classmethod
    async def open(cls, server: Server, user: User, conversation_pk: int) -> SilentSocket:
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", server.port))
        cookie = "; ".join(f"{k}={v}" for k, v in user.cookies.items())
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /ws/chat/ HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {server.url}\r\nCookie: {cookie}\r\n\r\n"
        )
        await loop.sock_sendall(sock, request.encode())
        silent = cls(sock)
        head = await silent._read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        watch = orjson.dumps({"t": "watch", "c": conversation_pk})
        await loop.sock_sendall(sock, _client_frame(watch))
        reply = await silent._read_frame()
        assert orjson.loads(reply) == {"t": "watching", "c": conversation_pk}
        return silent

    async def _read_exactly(self, size: int) -> bytes:
        loop = asyncio.get_running_loop()
        data = b""
        while len(data) < size:
            more = await loop.sock_recv(self.sock, size - len(data))
            if not more:
                raise ConnectionError("closed")
            data += more
        return data

    async def _read_until(self, end: bytes) -> bytes:
        data = b""
        while not data.endswith(end):
            data += await self._read_exactly(1)
        return data

    async def _read_frame(self) -> bytes:
        first, second = await self._read_exactly(2)
        size = second & 0x7F
        if size == 126:
            (size,) = struct.unpack("!H", await self._read_exactly(2))
        elif size == 127:
            (size,) = struct.unpack("!Q", await self._read_exactly(8))
        payload = await self._read_exactly(size)
        if first & 0x0F == 0x8:  # close
            raise _Closed(struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None)
        return payload

    async def read_to_the_end(self) -> int | None:
        """Read what is left; the close code the server sent, or None if it just dropped us."""
        try:
            while True:
                await self._read_frame()
        except _Closed as closed:
            return closed.code
        except (ConnectionError, OSError):
            return None

    def close(self) -> None:
        self.sock.close()


class _Closed(Exception):
    def __init__(self, code: int | None) -> None:
        self.code = code


def _client_frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert len(payload) < 126
    return bytes([0x81, 0x80 | len(payload)]) + mask + masked


def send_queues(port: int) -> int:
    """Bytes the kernel holds unsent for the server's established connections (`ss` Send-Q)."""
    out = subprocess.run(
        ["ss", "-tnH", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, check=True, timeout=5,
    ).stdout  # fmt: skip
    return sum(int(line.split()[1]) for line in out.splitlines() if line.strip())


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_sockets_that_stop_reading_are_closed_and_the_answer_goes_on(
    dora: User, server_a: Server
) -> None:
    conversation_pk = await dora.new_conversation(server_a, "Hello there", FAST)
    await dora.wait_idle(conversation_pk)
    log_start = len(server_a.log_text())
    silent = [await SilentSocket.open(server_a, dora, conversation_pk) for _ in range(SILENT)]
    try:
        async with dora.socket(server_a, conversation_pk) as healthy:
            before = rss_kb(server_a.process.pid)
            generation_pk = await dora.send(server_a, conversation_pk, "A very long story", BIG)
            page = ShownAnswer(generation_pk)
            peak, queued = before, 0

            async def watch_memory() -> None:
                nonlocal peak, queued
                while True:
                    peak = max(peak, rss_kb(server_a.process.pid))
                    queued = max(queued, send_queues(server_a.port))
                    await asyncio.sleep(0.05)  # a sampling rate, not a wait for a state

            sampler = asyncio.create_task(watch_memory())
            try:
                await follow_page(healthy, page, within=30)
            finally:
                sampler.cancel()
        wire = sum(len(orjson.dumps(m)) for _, m in healthy.received)
        growth = peak - before
        print(
            f"slow clients: {SILENT} silent sockets, {wire / 1e6:.2f} MB for the healthy page; "
            f"server RSS {before / 1024:.0f} MB -> peak {peak / 1024:.0f} MB "
            f"(+{growth / SILENT:.0f} KB per silent socket), kernel send queues at most "
            f"{queued / SILENT / 1024:.0f} KB per silent socket"
        )
        codes = await asyncio.wait_for(asyncio.gather(*(s.read_to_the_end() for s in silent)), 10)
    finally:
        for s in silent:
            s.close()
    row = await dora.generation(generation_pk)
    assert row["status"] == "completed"
    assert page.content == row["content"]
    assert page.not_prefix_of(row["content"]) == []
    assert all(code in (CLOSE_TOO_SLOW, None) for code in codes), codes
    log = server_a.log_text()[log_start:]
    assert log.count("Closing the websocket of") == SILENT, log_excerpt(log)
    assert no_tracebacks(log) == [], log_excerpt(log)
    # Unbounded, a silent socket's backlog is everything it was sent (`wire`): in the kernel up
    # to its 4 MB send buffer, then on Twisted's heap. Bounded, it stops near the limit.
    assert wire > 2 * WS_MAX_BUFFERED, "the answer was too short to tell"
    assert queued / SILENT < 2 * WS_MAX_BUFFERED, "the silent sockets' backlog was not bounded"
