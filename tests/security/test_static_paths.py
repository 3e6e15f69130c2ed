"""Paths under /static/ that leave the static directories, over a real Daphne server.

Sent as raw request lines (an HTTP client would normalise `..` away before sending): each is a
404 and puts no traceback in the server's log, however it is spelled (plain, percent-encoded,
backslashes, absolute, a NUL byte). The control: a real static file is served.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.multiprocess.servers import ROOT, Server
from tests.waiting import eventually

SECRET_KEY_FILE = ROOT / "chatapp" / ".secret_key"
PATHS = [
    "/static/../chatapp/.secret_key",  # the review's
    "/static/%2e%2e/chatapp/.secret_key",
    "/static/%2E%2E%2Fchatapp%2F.secret_key",
    "/static/..%2f..%2fchatapp/.secret_key",
    "/static/.%2e/.%2e/etc/passwd",
    "/static/..\\chatapp\\.secret_key",
    "/static/%5c..%5cchatapp%5c.secret_key",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/chatapp/../../../chatapp/.secret_key",
    "/static/chatapp/chat.js%00.png",
    "/static/%00",
]


async def get_raw(server: Server, target: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        async with asyncio.timeout(10):
            response = await reader.read()
    finally:
        writer.close()
    status_line, _, _ = response.partition(b"\r\n")
    return int(status_line.split()[1]), response


@pytest.mark.parametrize("target", PATHS)
async def test_a_path_out_of_the_static_directories_is_not_found(
    server: Server, target: str
) -> None:
    logged = len(server.log_text())
    status, response = await get_raw(server, target)
    assert status == 404, (target, response[:300])
    if SECRET_KEY_FILE.exists():
        assert SECRET_KEY_FILE.read_bytes().strip() not in response
    assert b"root:" not in response

    # Daphne's access log line for the request comes after anything the request logged.
    def answered() -> str:
        text = server.log_text()[logged:]
        return text if '" 404 ' in text or '" 500 ' in text else ""

    new = await eventually(answered, what="the access log line")
    assert "Traceback" not in new, new
    assert "Internal Server Error" not in new, new


async def test_a_static_file_is_served(server: Server) -> None:
    status, response = await get_raw(server, "/static/chatapp/chat.js")
    assert status == 200, response[:300]
