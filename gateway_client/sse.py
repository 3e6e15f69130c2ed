"""Incremental Server-Sent Events decoder, by the WHATWG event-stream rules, at the bytes level.

Framing works on bytes so that a read ending inside a multi-byte UTF-8 character needs no special
care: text is decoded only once a whole line is in hand. Lines end at CRLF, LF or a lone CR (a CR
at the end of one read may be the first half of a CRLF, so a LF at the start of the next read is
dropped). Complete lines are cut with `bytes.split` after folding CRLF/CR into LF, which keeps the
per-read cost in C; a read with no line end is only appended to a list, so a long line arriving in
many reads costs linear, not quadratic, time.

`close()` hands over an event still pending at end of input instead of dropping it as the spec
would: the caller decides (a final `data: [DONE]` without its blank line still counts).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LimitExceeded

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "EventLimitExceeded",
    "RawLimit",
    "SSEDecoder",
    "ServerSentEvent",
]

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 32 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Feed it bytes as they arrive; it returns the events completed by each read."""

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_event_bytes = max_event_bytes
        self._partial: list[bytes] = []  # pieces of the line not yet ended
        self._partial_len = 0
        self._skip_lf = False  # the last read ended with CR
        self._at_start = True  # a BOM may still come
        self._data: list[bytes] = []
        self._data_len = 0
        self._event = b""
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode one read. On a cap, raises `EventLimitExceeded` with the events before it."""
        try:
            raw = self.feed_raw(chunk)
        except RawLimit as exc:
            raise EventLimitExceeded(exc.message, [_event(r) for r in exc.raw]) from None
        return [_event(r) for r in raw] if raw else []

    def close(self) -> list[ServerSentEvent]:
        """End of input: the unterminated last line counts, and a pending event is handed over."""
        try:
            raw = self.close_raw()
        except RawLimit as exc:
            raise EventLimitExceeded(exc.message, [_event(r) for r in exc.raw]) from None
        return [_event(r) for r in raw]

    def feed_raw(self, chunk: bytes) -> list[RawEvent]:
        """`feed` without building event objects: (data bytes, event type, id, retry) tuples.

        The stream parser uses this: it reads only `data`, and orjson parses the bytes directly.
        """
        if self._at_start:
            chunk = self._strip_bom(chunk)
            if self._at_start:
                return []
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
        if not chunk:
            return []
        # `find`, not `in`: `in` first tries its operand as an int, and that TypeError costs more
        # than the search.
        has_cr = chunk.find(b"\r") >= 0
        if not has_cr and chunk.find(b"\n") < 0:
            self._append_partial(chunk, [])
            return []
        if self._partial:
            self._partial.append(chunk)
            chunk = b"".join(self._partial)
            self._partial.clear()
            self._partial_len = 0
        if has_cr:
            self._skip_lf = chunk[-1] == 0x0D
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        rest = lines.pop()
        events: list[RawEvent] = []
        data = self._data
        max_line = self.max_line_bytes
        for line in lines:
            if line[:6] == b"data: ":  # the common case, inline
                if len(line) > max_line:
                    raise RawLimit(f"a line is longer than {max_line} bytes", events)
                data.append(line[6:])
                self._data_len += len(line) - 5
                if self._data_len > self.max_event_bytes:
                    data.clear()
                    self._data_len = 0
                    raise RawLimit(f"an event is larger than {self.max_event_bytes} bytes", events)
            elif not line:
                if len(data) == 1 and not self._event and self._retry is None:
                    events.append((data[0], b"", self._last_id, None))  # the common case, inline
                    data.clear()
                    self._data_len = 0
                elif data:
                    events.append(self._take())
                else:
                    self._event = b""
            else:
                self._line(line, events)
        if rest:
            self._append_partial(rest, events)
        return events

    def close_raw(self) -> list[RawEvent]:
        events: list[RawEvent] = []
        if self._partial:
            line = b"".join(self._partial)
            self._partial.clear()
            self._partial_len = 0
            self._line(line, events)
        if self._data:
            events.append(self._take())
        self._at_start = False
        return events

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished line or event are held."""
        return bool(self._partial or self._data)

    def _strip_bom(self, chunk: bytes) -> bytes:
        held = b"".join(self._partial) + chunk
        if len(held) < len(_BOM) and _BOM.startswith(held):
            self._partial = [held]  # could still become a BOM
            return b""
        self._partial.clear()
        self._at_start = False
        return held[len(_BOM) :] if held.startswith(_BOM) else held

    def _append_partial(self, piece: bytes, events: list[RawEvent]) -> None:
        self._partial.append(piece)
        self._partial_len += len(piece)
        if self._partial_len > self.max_line_bytes:
            self._partial.clear()
            self._partial_len = 0
            raise RawLimit(f"a line is longer than {self.max_line_bytes} bytes", events)

    def _line(self, line: bytes, events: list[RawEvent]) -> None:
        """Any line but `data: ...` (which `feed_raw` handles inline)."""
        if not line:
            if self._data:
                events.append(self._take())
            else:
                self._event = b""
            return
        if len(line) > self.max_line_bytes:
            raise RawLimit(f"a line is longer than {self.max_line_bytes} bytes", events)
        if line[0] == 0x3A:  # ":" comment, e.g. keep-alives
            return
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":  # also "data" with no colon: an empty data line
            self._data.append(value)
            self._data_len += len(value) + 1
            if self._data_len > self.max_event_bytes:
                self._data.clear()
                self._data_len = 0
                raise RawLimit(f"an event is larger than {self.max_event_bytes} bytes", events)
        elif field == b"event":
            self._event = value
        elif field == b"id":
            if b"\0" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():
            self._retry = int(value)

    def _take(self) -> RawEvent:
        data = self._data
        payload = data[0] if len(data) == 1 else b"\n".join(data)
        data.clear()
        self._data_len = 0
        raw = (payload, self._event, self._last_id, self._retry)
        self._event = b""
        self._retry = None
        return raw


# (data, event type, last event id, retry): what `feed_raw` hands out.
type RawEvent = tuple[bytes, bytes, str | None, int | None]


def _event(raw: RawEvent) -> ServerSentEvent:
    data, event, event_id, retry = raw
    return ServerSentEvent(
        data=data.decode("utf-8", "replace"),
        event=event.decode("utf-8", "replace") if event else "message",
        id=event_id,
        retry=retry,
    )


class RawLimit(Exception):
    """A cap passed in a raw read (`feed_raw`, `close_raw`), with the raw events completed before
    it: `feed` turns it into `EventLimitExceeded`, `stream_parser` into an error event."""

    def __init__(self, message: str, raw: list[RawEvent]) -> None:
        super().__init__(message)
        self.message = message
        self.raw = raw


class EventLimitExceeded(LimitExceeded):
    """A cap was passed; `events` are those the same read completed before it."""

    def __init__(self, message: str, events: list[ServerSentEvent]) -> None:
        super().__init__(message)
        self.events = events
