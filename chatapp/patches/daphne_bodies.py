"""Daphne's requests, refused by the size of their body while it arrives (`access/body_limits.py`).

Daphne hands the application a body only once Twisted has received all of it (into a temporary
file), and then queues all of it at once: an ASGI middleware would see a 50 MB body only after
the server held it, and Django's parsing of it cost ten times more (a 50 MB post to the sign-in
page took the server from 272 to 854 MB). So `enable()` (from `chatapp/asgi.py`) replaces the
request class Daphne's HTTP factory builds with one that counts as the body comes in: a
`Content-Length` past the route's limit is refused from the headers (no `100 Continue` is sent
for it), a chunked body once what arrived passes it.

The refusal is a 413 with the limit in words, written straight to the connection, which then
takes no more requests: what the client goes on sending is read and dropped, so that it gets to
read the answer (closing at once would reset the connection under it, the answer unread), for
at most `LINGER` seconds. Elsewhere (uvicorn, the tests' in-process clients) `enable()` does
nothing: nginx in front bounds bodies by the same table.

What this leans on in Daphne and Twisted is pinned by `tests/chatapp/patches/test_patches.py`.
"""

from __future__ import annotations

import logging
import sys
from io import BytesIO
from typing import Any
from urllib.parse import unquote, urlsplit

from chatapp.access.body_limits import BodyLimit, limit_for, refusal

logger = logging.getLogger(__name__)

LINGER = 10.0  # seconds a refused client has to stop sending and read the 413


def target_path(target: bytes) -> str:
    """The path of a request line's target (`/c/1/send/?x`, or absolute), decoded as Daphne
    decodes it for Django."""
    return unquote(urlsplit(target.decode("latin-1")).path)


def response(limit: BodyLimit, size: int | None) -> bytes:
    body = refusal(limit, size).encode()
    head = (
        "HTTP/1.1 413 Content Too Large\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def call_later(delay: float, function: Any) -> None:
    """On Daphne's reactor (imported here only: importing it installs one)."""
    from twisted.internet import reactor

    # Twisted's zope interfaces read to mypy as methods without `self`.
    reactor.callLater(delay, function)  # type: ignore[arg-type]


def _limited(request: type[Any]) -> type[Any]:
    class LimitedRequest(request):  # type: ignore[misc]
        limit: BodyLimit | None = None
        received = 0
        refused = False

        def gotLength(self, length: int | None) -> None:
            # The channel has parsed the request line and every header, not yet the body.
            self.limit = limit = limit_for(target_path(self.channel._path))
            if length is not None and length > limit.max_bytes:
                self.content = BytesIO()
                self._refuse(length)
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self.refused:
                return
            self.received += len(data)
            assert self.limit is not None
            if self.received > self.limit.max_bytes:
                self._refuse(None)
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            if not self.refused:  # else the body ended within what was read with the refusal
                super().requestReceived(command, path, version)

        def _refuse(self, size: int | None) -> None:
            assert self.limit is not None
            self.refused = True
            self.requestHeaders.removeHeader(b"Expect")  # no `100 Continue` after the answer
            channel = self.channel
            logger.warning(
                "Refused the body posted to %s: %s, the limit there %d bytes",
                target_path(channel._path),
                "chunked, past the limit" if size is None else f"{size} bytes",
                self.limit.max_bytes,
            )
            channel.dataReceived = _drop  # the rest of the body, and anything after it
            transport = channel.transport
            transport.write(response(self.limit, size))
            transport.loseWriteConnection()
            call_later(LINGER, lambda: _abort_if_open(transport))

    return LimitedRequest


def _drop(data: bytes) -> None:
    pass


def _abort_if_open(transport: Any) -> None:
    if transport.connected:
        transport.abortConnection()


def enable() -> None:
    """Make Daphne's HTTP factory build requests that refuse a body past its limit (a no-op
    outside Daphne)."""
    module = sys.modules.get("daphne.http_protocol")
    if module is None or "daphne.server" not in sys.modules:
        return
    request: Any = getattr(module, "WebRequest")  # noqa: B009 (untyped module)
    if getattr(request, "limits_bodies", False):
        return
    limited = _limited(request)
    limited.limits_bodies = True
    setattr(module, "WebRequest", limited)  # noqa: B010
