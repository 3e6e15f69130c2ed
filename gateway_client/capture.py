"""Captured responses, as `curl -siN` saves them, and their replay through the stream reader.

A capture is a status line, headers, a blank line and the body bytes; a file with no status line
is taken as a bare event-stream body (a 200). Replay feeds the body to the same parser and
accumulator the live client uses, in pieces of any size, so a capture shows exactly what the app
would have made of the stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .accumulator import Accumulator, Completion
from .harmony_tags import HarmonyTags
from .stream_parser import EventStreamParser, is_event_stream, parse_retry_after, status_error
from .think_tags import ThinkTags

__all__ = ["Capture", "CaptureError", "parse_capture", "replay"]

_SSE_FIELDS = (b"data", b":", b"event", b"id", b"retry")


class CaptureError(ValueError):
    """The bytes are not a `curl -siN` capture nor a bare event stream."""


@dataclass(frozen=True, slots=True)
class Capture:
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased; last one wins
    body: bytes = b""


def parse_capture(raw: bytes) -> Capture:
    if not raw.strip():
        raise CaptureError("the file is empty")
    if not raw.startswith(b"HTTP/"):
        first = raw.lstrip(b"\xef\xbb\xbf \t\r\n")
        if not first.startswith(_SSE_FIELDS):
            raise CaptureError(
                "not a capture: expected `curl -siN` output (status line, headers, blank line, "
                "body) or a bare event-stream body"
            )
        return Capture(200, {"content-type": "text/event-stream"}, raw)
    while True:
        status, headers, raw = _head(raw)
        # curl saves every header block: skip 1xx and a proxy's CONNECT answer.
        if (100 <= status < 200 or headers.get(":connect")) and raw.startswith(b"HTTP/"):
            continue
        headers.pop(":connect", None)
        return Capture(status, headers, raw)


def _head(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    ends = [(raw.find(sep), sep) for sep in (b"\r\n\r\n", b"\n\n")]
    ends = [(pos, sep) for pos, sep in ends if pos >= 0]
    if not ends:
        head, body = raw, b""
    else:
        pos, sep = min(ends)
        head, body = raw[:pos], raw[pos + len(sep) :]
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    parts = lines[0].decode("latin-1").split(None, 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise CaptureError(f"not a capture: bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    if len(parts) > 2 and parts[2].lower() == "connection established":
        headers[":connect"] = "1"
    for line in lines[1:]:
        name, colon, value = line.decode("latin-1").partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers, body


def replay(capture: Capture, *, chunk_size: int | None = None) -> Completion:
    """Read the capture as the live client would, feeding the body `chunk_size` bytes at a time."""
    headers = capture.headers
    request_id = headers.get("x-request-id")
    accumulator = Accumulator(
        status=capture.status,
        generation_id=headers.get("x-generation-id"),
        request_id=request_id,
    )
    content_type = headers.get("content-type")
    if capture.status != 200 or not is_event_stream(content_type):
        error = status_error(
            capture.status,
            content_type,
            capture.body,
            request_id=request_id,
            retry_after=parse_retry_after(headers.get("retry-after")),
        )
        accumulator.fail(error.info)
        return accumulator.completion
    parser = EventStreamParser()
    think, harmony = (
        ThinkTags(),
        HarmonyTags(),
    )  # inline reasoning markup, as `EventStream` reads it
    body = capture.body
    step = chunk_size if chunk_size and chunk_size > 0 else max(len(body), 1)
    for start in range(0, len(body), step):
        for event in think.feed(harmony.feed(parser.feed(body[start : start + step]))):
            accumulator.add(event)
    last = think.feed(harmony.feed(parser.close()))
    for event in last + think.feed(harmony.close()) + think.close():  # in this order: the rest
        accumulator.add(event)
    return accumulator.completion
