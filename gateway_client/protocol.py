"""Response bytes → typed events: SSE framing, `[DONE]`, JSON, and the stream's terminal state.

`EventStreamParser` is what both the live client and `replay` feed, so a capture replays exactly as
the stream would have been read. It never raises on bad input: a malformed payload or a passed cap
becomes an `ErrorEvent` (type `protocol_error` / `limit_exceeded`) after the events that came
before it, so nothing already received is lost. After `[DONE]` or an error, input is ignored.

`status_error` reads a response that is not an event stream (an error status, or a 200 of another
type) into a `StatusError`, from either documented JSON envelope or, for a proxy's HTML page, the
status and a short excerpt.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Annotated, Any

import msgspec
import orjson

from .chunks import error_info, parse_chunk
from .errors import ErrorInfo, StatusError
from .events import Done, ErrorEvent, Event, Finish, Meta, ReasoningDelta, TextDelta
from .sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, SSEDecoder, _RawLimit

__all__ = ["EventStreamParser", "is_event_stream", "parse_retry_after", "status_error"]

_EXCERPT_CHARS = 200


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

    @property
    def finished(self) -> bool:
        return self.done or self.failed

    def feed(self, data: bytes) -> list[Event]:
        if self.finished:
            return []  # text after [DONE] (or an error) is ignored
        try:
            raw = self._decoder.feed_raw(data)
        except _RawLimit as exc:
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
        except _RawLimit:
            return []
        if not pending:
            return []
        data = pending[0][0]
        if data.strip() != b"[DONE]" and _loads(data) is _INVALID:
            return []
        return self._events([data])

    def _events(self, payloads: list[bytes]) -> list[Event]:
        events: list[Event] = []
        for data in payloads:
            if not data:
                continue  # a bare `data:` carries no chunk
            if data[0] == 0x5B and data.strip() == b"[DONE]":  # "["
                self.done = True
                events.append(Done())
                break
            try:
                common = _decode_common(data)
            except msgspec.DecodeError:
                pass
            else:
                # The common shape: at most one of the delta's three text fields set, so the
                # order of its keys (which a Struct does not keep) cannot matter.
                choices = common.choices
                if not choices:
                    text = reasoning = reason = None
                else:
                    choice = choices[0]
                    delta = choice.delta
                    text = delta.content
                    reasoning = delta.reasoning
                    other = delta.reasoning_content
                    reason = choice.finish_reason
                    if choice.index or (text and (reasoning or other)) or (reasoning and other):
                        common = None
                    elif other:
                        reasoning = other
                if common is not None:
                    chunk_id = common.id
                    model = common.model
                    if (chunk_id and chunk_id != self._id) or (model and model != self._model):
                        events.append(self._meta(chunk_id, model))
                    if text:
                        events.append(TextDelta(text))
                    elif reasoning:
                        events.append(ReasoningDelta(reasoning))
                    if reason:
                        events.append(Finish(reason))
                    continue
            if self._general(data, events):
                break
        return events

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


# The chunk shape nearly every token arrives in, decoded straight from bytes by msgspec. Every
# field is declared with the only types it may take (unknown keys and other types fail the decode
# and the chunk goes through `parse_chunk`), so a chunk read here means exactly what it would mean
# there: orjson would accept the same bytes (ints within 64 bits, valid UTF-8, nothing skipped
# unread) and `parse_chunk` would give the same events. `None`-typed fields must be null.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class _Delta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    role: str | None = None
    refusal: None = None
    tool_calls: None = None
    channel: str | None = None
    token_id: _Int | None = None


class _Choice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    delta: _Delta
    index: _Int = 0
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    logprobs: None = None


class _Chunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    choices: list[_Choice]
    id: str | None = None
    model: str | None = None
    object: str | None = None
    created: _Int | None = None
    system_fingerprint: str | None = None
    provider: str | None = None
    service_tier: str | None = None
    usage: None = None


_decode_common = msgspec.json.Decoder(_Chunk).decode


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
