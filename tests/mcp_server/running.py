"""Starting the test MCP server (`server.py`) as a real process on loopback, and stopping it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deploy.processes import stop

SERVER = Path(__file__).with_name("server.py")


@dataclass
class RunningServer:
    """The server's process, its Streamable HTTP URL, and the lines it printed (its tools print
    when they start and when they are cancelled)."""

    process: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sse-transport/sse"

    def said(self, line: str) -> bool:
        return line in self.lines

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read(server: RunningServer) -> None:
    assert server.process.stdout is not None
    for line in server.process.stdout:
        server.lines.append(line.rstrip("\n"))


@contextlib.contextmanager
def serve(port: int | None = None) -> Iterator[RunningServer]:
    """The test MCP server on `port` (a free one by default), until the block ends."""
    port = port or _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    server = RunningServer(process, port)
    threading.Thread(target=_read, args=(server,), daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError("the MCP test server exited:\n" + "\n".join(server.lines))
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.05)
        yield server
    finally:
        stop(process)
        if process.stdout is not None:
            process.stdout.close()
