"""Daphne's websockets, made to push back on a browser that does not read, and to deflate.

Daphne has a setting for neither, so `enable()` (from `chatapp/asgi.py`) replaces the websocket
factory its server builds with a subclass that does both; elsewhere (uvicorn, the tests'
in-process servers) it does nothing.

**A bound on what is held for a browser that does not read.** Daphne hands every
`websocket.send` to autobahn, which writes the frame to the Twisted transport at once; the
kernel's send buffer takes what it can (autotuned, up to `tcp_wmem`'s 4 MB), and the transport
keeps the rest in a list that grows without limit. Nothing pushes back on the consumer
(Channels' `send` returns at once), so a tab on a stalled network, or a client that never reads,
made the server hold every delta and settled block sent to it: memory grew with the answers
streamed, per socket. Here, once more than `CHAT_WS_MAX_BUFFERED` bytes wait for a socket (in the
kernel and the transport), nothing more is queued for it and it is closed with `CLOSE_TOO_SLOW`;
after `GRACE` seconds the connection is aborted, freeing its backlog, if the client has not read
its way to the close frame by then. The generation is not touched: it belongs to no socket. The
page reconnects by itself and catches up by snapshot.

**permessage-deflate.** A streaming answer's settled blocks arrive as HTML
(`streaming/live_blocks.py`) right after their text did as deltas; with a deflate context kept
across messages each block costs little more than its tags, and the deltas' envelopes shrink too
(`python -m benchmarks markdown`: 9.2 wire bytes per answer byte without, 1.46 with, settled
blocks and drafts included). The factory accepts the browser's offer with a 32 KB window for what
we send (a draft repeats HTML from further back than a smaller one holds: 2.9 with 4 KB), a 4 KB
one for what the browser sends, and a small memory level: about 155 KB of zlib state per socket
instead of the default's ~300 KB, as hundreds of sockets are open at once.
Inflated client messages are capped, so a small compressed frame cannot become a huge message.

What this leans on in Daphne, autobahn and Twisted is pinned by
`tests/chatapp/patches/test_patches.py`.
"""

from __future__ import annotations

import fcntl
import logging
import struct
import sys
import termios
from collections.abc import Callable
from typing import Any

from autobahn.exception import Disconnected
from django.conf import settings

logger = logging.getLogger(__name__)

CLOSE_TOO_SLOW = 4408  # like 4401: the HTTP status it stands for (408, the client was too slow)
MAX_BUFFERED = 1024 * 1024  # bytes waiting in one socket's transport (CHAT_WS_MAX_BUFFERED)
GRACE = 2.0  # seconds a too-slow socket has to read its close frame before it is dropped

# The window our deflater sends with: a draft repeats HTML sent further back than 4 KB (the
# benchmark's answer: 2.9 wire bytes per answer byte at 12 bits, 1.46 at 15). The browser's
# deflater, for its small JSON commands, gets a small window (so does our inflater).
SEND_WINDOW_BITS = 15
RECEIVE_WINDOW_BITS = 12
MEM_LEVEL = 5
MAX_CLIENT_MESSAGE = 64 * 1024  # bytes, inflated: the browser sends only small JSON commands


# --- The bound ------------------------------------------------------------------------------------


def buffered_bytes(transport: Any) -> int:
    """Bytes written to a Twisted TCP transport that the client has not received: what Twisted
    holds, and what the kernel does (its send buffer autotunes to megabytes, so it is most of a
    silent socket's backlog at first). 0 for a transport of another kind: no bound is read."""
    held = twisted_held(transport)
    return 0 if held is None else held + kernel_queued(transport)


def twisted_held(transport: Any) -> int | None:
    """What Twisted holds for the transport (attribute reads, no system call); None for a
    transport of another kind."""
    try:
        held: int = len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    except AttributeError:
        return None
    return held


def kernel_queued(transport: Any) -> int:
    """What the kernel holds in the socket's send queue (a system call)."""
    try:
        fd = transport.getHandle().fileno()
        queued: int = struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0" * 4))[0]
    except (AttributeError, OSError):  # not Linux-like: Twisted's part alone
        return 0
    return queued


def max_buffered() -> int:
    """The bound in bytes; 0 turns it off."""
    return int(getattr(settings, "CHAT_WS_MAX_BUFFERED", MAX_BUFFERED))


def call_later(delay: float, function: Callable[[], None]) -> None:
    """On Daphne's reactor (imported here only: importing it installs one)."""
    from twisted.internet import reactor

    # Twisted's zope interfaces read to mypy as methods without `self`.
    reactor.callLater(delay, function)  # type: ignore[arg-type]


def _bounded(protocol: type[Any]) -> type[Any]:
    class BoundedWebSocketProtocol(protocol):  # type: ignore[misc]
        too_slow = False
        limit: int | None = None  # read from the settings at the first send
        # An upper bound on the kernel's queue: what it held when last asked, plus what was
        # written since (the queue only grows by what we write). The kernel is asked (a system
        # call) only when that bound could be over the limit, so a socket whose browser reads
        # costs one call per megabyte or so, not one per frame.
        queued_bound = 0

        def serverSend(self, content: bytes | str, binary: bool = False) -> None:
            if self.too_slow:
                return  # the page re-syncs by snapshot when it reconnects
            limit = self.limit
            if limit is None:
                limit = self.limit = max_buffered()
            if limit:
                held = twisted_held(self.transport)
                if held is not None and (held or self.queued_bound > limit):
                    self.queued_bound = kernel_queued(self.transport)
                    if held + self.queued_bound > limit:
                        self._close_too_slow(limit)
                        return
                self.queued_bound += len(content)
            try:
                super().serverSend(content, binary)
            except Disconnected:
                # The tab went away while a message was on its way to it: not an error (it was
                # a traceback per message in the log). A page that comes back re-syncs.
                logger.debug("A message for the closed websocket of %s dropped", self.client_addr)

        def _close_too_slow(self, limit: int) -> None:
            self.too_slow = True
            logger.warning(
                "Closing the websocket of %s: it left over %d bytes unread",
                self.client_addr,
                limit,
            )
            self.sendClose(code=CLOSE_TOO_SLOW, reason="too slow: reconnect")
            call_later(GRACE, self._drop_if_open)

        def _drop_if_open(self) -> None:
            if self.transport is not None and self.transport.connected:
                self.transport.abortConnection()

    return BoundedWebSocketProtocol


# --- Deflate --------------------------------------------------------------------------------------


def _accept(offers: list[Any]) -> Any:
    from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(  # type: ignore[no-untyped-call]
                offer,
                request_max_window_bits=RECEIVE_WINDOW_BITS if offer.accept_max_window_bits else 0,
                window_bits=SEND_WINDOW_BITS,
                mem_level=MEM_LEVEL,
                max_message_size=MAX_CLIENT_MESSAGE,
            )
    return None


# --- The factory ----------------------------------------------------------------------------------


def _patched(factory: type[Any]) -> type[Any]:
    class ChatWebSocketFactory(factory):  # type: ignore[misc]
        protocol = _bounded(factory.protocol)
        negotiates_deflate = True

        def setProtocolOptions(self, **options: Any) -> None:
            options.setdefault("perMessageCompressionAccept", _accept)
            super().setProtocolOptions(**options)

    return ChatWebSocketFactory


def enable() -> None:
    """Make Daphne's server build bounded, deflating websockets (a no-op elsewhere)."""
    server = sys.modules.get("daphne.server")
    if server is None:
        return
    factory: Any = getattr(server, "WebSocketFactory")  # noqa: B009 (untyped module)
    if getattr(factory, "negotiates_deflate", False):
        return
    setattr(server, "WebSocketFactory", _patched(factory))  # noqa: B010
