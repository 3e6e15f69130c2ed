"""permessage-deflate on the browsers' websockets, under Daphne.

A streaming answer's settled blocks arrive as HTML (`live_blocks.py`) right after their text did
as deltas; with a deflate context kept across messages each block costs little more than its
tags, and the deltas' envelopes shrink too (`python -m benchmarks markdown`: 5.0 wire bytes per
answer byte without, 1.3 with). Daphne has no setting for it, so `enable()` makes the factory it
builds accept the browser's offer, with a 4 KB window and a small memory level: about 32 KB of
zlib state per socket instead of the default's ~260 KB, as hundreds of sockets are open at once.
Inflated client messages are capped, so a small compressed frame cannot become a huge message.
"""

from __future__ import annotations

import sys
from typing import Any

WINDOW_BITS = 12
MEM_LEVEL = 5
MAX_CLIENT_MESSAGE = 64 * 1024  # bytes, inflated: the browser sends only small JSON commands


def _accept(offers: list[Any]) -> Any:
    from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(  # type: ignore[no-untyped-call]
                offer,
                request_max_window_bits=WINDOW_BITS if offer.accept_max_window_bits else 0,
                window_bits=WINDOW_BITS,
                mem_level=MEM_LEVEL,
                max_message_size=MAX_CLIENT_MESSAGE,
            )
    return None


def enable() -> None:
    """Make Daphne's websocket factory negotiate permessage-deflate (a no-op elsewhere)."""
    server = sys.modules.get("daphne.server")
    if server is None:
        return
    factory: Any = getattr(server, "WebSocketFactory")  # noqa: B009 (untyped module)
    if getattr(factory, "negotiates_deflate", False):
        return

    class DeflatingWebSocketFactory(factory):  # type: ignore[misc]
        negotiates_deflate = True

        def setProtocolOptions(self, **options: Any) -> None:
            options.setdefault("perMessageCompressionAccept", _accept)
            super().setProtocolOptions(**options)

    setattr(server, "WebSocketFactory", DeflatingWebSocketFactory)  # noqa: B010
