"""A request body past its route's limit is refused while it arrives, against a real Daphne.

The measure is the server's resident memory: an anonymous 50 MB post to the sign-in page took a
server from 272 to 854 MB (issue 37; here, after a warm-up, one such post still grew it by about
48 MB: Daphne queued the whole body, Django parsed it), and may now grow it by less than 20 MB,
whether the body's length is announced or it comes chunked. A refusal is a 413 that says the
limit, the server goes on serving, and a message's files still fit their route's larger limit.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatapp.access.body_limits import FORM, limit_for
from tests.multiprocess.servers import Server

MB = 1024 * 1024
BOUNDARY = "----body-limits"


def rss(server: Server) -> int:
    """The server process's resident memory, in bytes."""
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def multipart(size: int) -> Iterator[bytes]:
    """A form with one file of `size` bytes, in 1 MB pieces: the client never holds it."""
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    piece = b"x" * MB
    for start in range(0, size, MB):
        yield piece[: min(MB, size - start)]
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def framing() -> int:
    return sum(len(part) for part in multipart(0))


def post(server: Server, path: str, size: int, *, chunked: bool = False) -> httpx.Response:
    headers = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    if not chunked:
        headers["Content-Length"] = str(size + framing())
    with httpx.Client(base_url=server.url, timeout=30) as client:
        return client.post(path, content=multipart(size), headers=headers)


@pytest.fixture
def warm(server: Server) -> None:
    """The sign-in page and posts to it served once, so that what they first import and cache
    is not counted as what a body cost."""
    assert httpx.get(f"{server.url}/accounts/login/").status_code == 200
    assert post(server, "/accounts/login/", 1024).status_code == 403  # no CSRF token
    post(server, "/accounts/login/", MB)


@pytest.mark.usefixtures("warm")
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_fifty_mb_to_the_sign_in_page_is_refused_and_costs_the_server_little(
    server: Server, chunked: bool
) -> None:
    before = rss(server)
    response = post(server, "/accounts/login/", 50 * MB, chunked=chunked)
    grown = rss(server) - before

    assert grown < 20 * MB, f"the server grew by {grown / MB:.0f} MB"
    assert response.status_code == 413
    assert "at most 64.0 KB for a sign-in form" in response.text
    assert httpx.get(f"{server.url}/accounts/login/").status_code == 200


def test_a_length_past_the_limit_is_refused_from_the_headers_before_any_body(
    server: Server,
) -> None:
    """A client that waits for `100 Continue` is told 413 instead, having sent nothing."""
    head = (
        "POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {50 * MB}\r\nExpect: 100-continue\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk

    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 413 Content Too Large"
    assert b"100 Continue" not in answer
    assert b"This one is 50.0 MB." in rest


def test_a_message_with_its_files_is_let_through_where_a_form_is_refused(server: Server) -> None:
    """Posted anonymously, a message past the form limit reaches Django (which refuses it for
    want of a CSRF token) on the send route, and is refused by size anywhere else."""
    size = FORM.max_bytes + MB
    assert size < limit_for("/c/new/send/").max_bytes

    assert post(server, "/c/new/send/", size).status_code == 403
    refused = post(server, "/c/1/rename/", size)
    assert refused.status_code == 413
    assert "at most 3.0 MB for a form" in refused.text
    assert post(server, "/c/new/send/", limit_for("/c/new/send/").max_bytes).status_code == 413
