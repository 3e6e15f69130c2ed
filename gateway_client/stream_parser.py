"""Response bytes → typed events: SSE framing, `[DONE]`, JSON, and the stream's terminal state.

`EventStreamParser` is what both the live client and `replay` feed, so a capture replays exactly as
the stream would have been read. It never raises on bad input: a malformed payload or a passed cap
becomes an `ErrorEvent` (type `protocol_error` / `limit_exceeded`) after the events that came
before it, so nothing already received is lost. After `[DONE]` or an error, input is ignored.

Most chunks take a fast path that gives exactly the events the general one (orjson, then
`chunks.parse_chunk`) would: the common shape (one choice's text, role or finish reason, nothing
else) is decoded straight from bytes into msgspec Structs that admit nothing else, and, once one
such chunk has been read, the bytes around its text become a template: a chunk with the same
bytes around its text needs only that string decoded. Anything else goes the general way.

`status_error` reads a response that is not an event stream (an error status, or a 200 of another
type) into a `StatusError`, from either documented JSON envelope or, for a proxy's HTML page, the
status and a short excerpt.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import msgspec
import orjson

from .chunks import error_info, parse_chunk
from .common_chunks import Template, decode_common, decode_str, learn_template, read_common
from .errors import ErrorInfo, StatusError
from .events import Done, ErrorEvent, Event, Finish, Meta
from .sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, RawLimit, SSEDecoder

__all__ = ["EventStreamParser", "is_event_stream", "parse_retry_after", "status_error"]

_EXCERPT_CHARS = 200
_LEARNINGS = 16  # templates learned per stream at most (see `_common`)


class EventStreamParser:
    """Feed body bytes; get typed events. `done` after `[DONE]`, `failed` after an error."""

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self._decoder = SSEDecoder(max_line_bytes=max_line_bytes, max_event_bytes=max_event_bytes)
        self.done = False
        self.failed = False
        self._id: Any = None
        self._model: Any = None
        self._template: Template | None = None
        self._learnings_left = _LEARNINGS

    @property
    def finished(self) -> bool:
        return self.done or self.failed

    def feed(self, data: bytes) -> list[Event]:
        if self.finished:
            return []  # text after [DONE] (or an error) is ignored
        try:
            raw = self._decoder.feed_raw(data)
        except RawLimit as exc:
            events = self._events([r[0] for r in exc.raw])
            if not self.finished:
                self.failed = True
                info = ErrorInfo(None, "limit_exceeded", "limit_exceeded", exc.message)
                events.append(ErrorEvent(info))
            return events
        return self._events([r[0] for r in raw]) if raw else []

    def close(self) -> list[Event]:
        """End of body. An event cut off mid-way (no blank line, not valid JSON) is dropped: the
        stream then simply has no `[DONE]`, which is what makes it incomplete."""
        if self.finished:
            return []
        try:
            pending = self._decoder.close_raw()
        except RawLimit:
            return []
        if not pending:
            return []
        data = pending[0][0]
        if data.strip() != b"[DONE]" and _loads(data) is _INVALID:
            return []
        return self._events([data])

    def _events(self, payloads: list[bytes]) -> list[Event]:
        events: list[Event] = []
        template = self._template
        for data in payloads:
            if not data:
                continue  # a bare `data:` carries no chunk
            if (
                template is not None
                and len(data) >= template.size
                and data.startswith(template.head)
                and data.endswith(template.tail)
            ):
                try:
                    text = decode_str(data[template.start : len(data) - template.end])
                except msgspec.DecodeError:
                    pass
                else:  # `_common`'s events, inline: this is the path of nearly every token
                    if (template.id and template.id != self._id) or (
                        template.model and template.model != self._model
                    ):
                        events.append(self._meta(template.id, template.model))
                    if text:
                        events.append(template.kind(text))
                    if template.reason:
                        events.append(Finish(template.reason))
                    continue
            if data[0] == 0x5B and data.strip() == b"[DONE]":  # "["
                self.done = True
                events.append(Done())
                break
            if not self._common(data, events) and self._general(data, events):
                break
            template = self._template
        return events

    def _common(self, data: bytes, events: list[Event]) -> bool:
        """A chunk of the common shape, by its Struct: True if it was one and its events were
        added. Its template is then learned, for the chunks after it."""
        try:
            read = read_common(decode_common(data))
        except msgspec.DecodeError:
            return False
        if read is None:
            return False
        chunk_id, model, kind, text, reason = read
        if (chunk_id and chunk_id != self._id) or (model and model != self._model):
            events.append(self._meta(chunk_id, model))
        if text:
            events.append(kind(text))
            if self._learnings_left:
                self._learnings_left -= 1
                self._template = learn_template(data, text) or self._template
        if reason:
            events.append(Finish(reason))
        return True

    def _general(self, data: bytes, events: list[Event]) -> bool:
        """Any chunk, through `parse_chunk`. True if the stream failed."""
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = _loads(data)
        if type(chunk) is not dict:
            self.failed = True
            events.append(ErrorEvent(_malformed(data)))
            return True
        chunk_id = chunk.get("id")
        model = chunk.get("model")
        if (chunk_id and chunk_id != self._id) or (model and model != self._model):
            events.append(self._meta(chunk_id, model))
        first = len(events)
        parse_chunk(chunk, events)
        if len(events) > first and type(events[first]) is ErrorEvent:  # errors come first
            self.failed = True
            return True
        return False

    def _meta(self, chunk_id: Any, model: Any) -> Meta:
        self._id = chunk_id or self._id
        self._model = model or self._model
        return Meta(self._id, self._model)


_INVALID = object()


def _loads(data: bytes) -> Any:
    """The payload as JSON, or `_INVALID`. orjson reads the bytes directly; invalid UTF-8 (which
    it rejects) is replaced first, as the event-stream rules decode it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return orjson.loads(data.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            pass
    return _INVALID


def _malformed(raw: bytes) -> ErrorInfo:
    data = raw[: _EXCERPT_CHARS * 4].decode("utf-8", "replace")
    excerpt = data if len(data) <= _EXCERPT_CHARS else data[:_EXCERPT_CHARS] + "…"
    return ErrorInfo(None, "invalid_json", "protocol_error", f"malformed event: {excerpt!r}")


def is_event_stream(content_type: str | None) -> bool:
    if not content_type:
        return False
    return content_type.split(";")[0].strip().lower() == "text/event-stream"


def status_error(
    status: int,
    content_type: str | None,
    body: bytes,
    *,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> StatusError:
    """The error a non-stream response stands for, whatever its body."""
    try:
        parsed = orjson.loads(body) if body.strip() else None
    except orjson.JSONDecodeError:
        parsed = None
    excerpt = _excerpt(body)
    if isinstance(parsed, dict) and parsed.get("object") == "error" and "error" not in parsed:
        parsed = {"error": parsed}  # vLLM before 0.9: the error object is the whole body
    if isinstance(parsed, dict) and parsed.get("error"):
        info = error_info(parsed["error"], status=status)
        if status == 200:
            info = ErrorInfo(status, info.code, info.type, info.message, info.request_id)
        return StatusError(
            info.message,
            status=status,
            code=info.code,
            type=info.type,
            request_id=info.request_id or request_id,
            retry_after=retry_after,
            body_excerpt=excerpt,
        )
    what = content_type or "no content type"
    if status == 200:
        message = f"expected an event stream, got {what}"
    elif parsed is None and body.strip():
        message = f"HTTP {status} with a body that is not JSON ({what}): {excerpt}"
    else:
        message = f"HTTP {status} without an error message"
    return StatusError(
        message,
        status=status,
        code=status,
        type="not_event_stream" if status == 200 else "http_error",
        request_id=request_id,
        retry_after=retry_after,
        body_excerpt=excerpt,
    )


def _excerpt(body: bytes) -> str:
    text = body[: _EXCERPT_CHARS * 8].decode("utf-8", "replace")
    text = re.sub(r"<[^>]*>", " ", text)
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "…"


def parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds (it may be a number or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
