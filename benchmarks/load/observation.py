"""What a simulated tab records of one answer, and the socket that counts its bytes.

Kept apart from `browser` (which knows the page) because this is the measurement side: every
field is a raw observation, and `metrics` derives the figures. Times are `time.time()`, so they
compare with the emulator's records and the orchestrator's samples (one machine, one clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection


@dataclass(slots=True)
class Observation:
    post_start: float = 0.0
    post_end: float | None = None
    page_at: float | None = None
    socket_open_at: float | None = None
    first_text_at: float | None = None
    first_text_via: str = ""  # "page" (flushed before the page rendered) or "socket"
    text_times: list[float] = field(default_factory=list)  # socket messages that added text
    seq_times: list[tuple[int, float]] = field(default_factory=list)  # (seq, when applied)
    done_at: float | None = None
    done_status: str = ""
    fragment_at: float | None = None
    fragment_status: str = ""
    generation: int | None = None
    text: str | None = None  # assembled from the page and the socket, at `done`
    wire_bytes: int = 0  # socket bytes received after the handshake, frame headers included
    messages: int = 0
    snapshot_requests: int = 0
    held: int = 0
    duplicates: int = 0
    updated: int = 0
    reconnects: int = 0
    error: str | None = None


class CountingConnection(ClientConnection):
    """A websocket client connection that counts the bytes received after the handshake."""

    wire_bytes = 0
    _head = b""
    _in_handshake = True

    def data_received(self, data: bytes) -> None:
        if self._in_handshake:
            head = self._head + data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                self._head = head
            else:
                self._in_handshake = False
                self.wire_bytes += len(head) - end - 4
        else:
            self.wire_bytes += len(data)
        super().data_received(data)
