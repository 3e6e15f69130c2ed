"""One decoded chunk → typed events, for every dialect the gateways speak.

The dialects differ only in details, so one reader handles them all by field presence rather than
by a dialect switch: `reasoning` or `reasoning_content` (Numes repeats the same text as a
`reasoning.text` entry of `reasoning_details`, so visible text is read from one representation per
chunk), `content` as a string or as a list of typed parts (Mistral: `text` parts are answer,
`thinking` parts reasoning), `usage.cost` or `usage.x_llm_cost_micro` (Groq's `x_groq.usage` where
`usage` is absent), and in-band errors with or without `choices`, with an int or a string `code`.
`error` is checked before `choices`, as every gateway asks. Image-stream frames
(`image_generation.*`) and text completions (`text`) come through here too.

Nothing non-empty is dropped unseen: a delta key we do not read (other than a few that carry
nothing for us), a content part of an unknown type, or content of another JSON type becomes an
`Unread` event, so an answer that comes out empty can say why. Citations are parsed here, once.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from .errors import ErrorInfo
from .events import (
    Annotation,
    Artifact,
    AudioOutput,
    Cost,
    ErrorEvent,
    Event,
    Finish,
    ImageOutput,
    ReasoningDelta,
    ReasoningDetail,
    TextDelta,
    ToolCallDelta,
    Unread,
    Usage,
)

__all__ = [
    "MAX_CITATION_URL_BYTES",
    "citation_url",
    "error_info",
    "parse_annotation",
    "parse_chunk",
    "parse_usage",
]

MAX_CITATION_URL_BYTES = 8192

# Delta keys seen in real streams that carry nothing for a reader (`role` has its own branch):
# Groq's `channel`, Together's `token_id`, the stray `index` of Mistral-served models.
_CARRY_NOTHING = frozenset({"channel", "token_id", "index"})


def parse_chunk(chunk: dict[str, Any], events: list[Event] | None = None) -> list[Event]:
    """The events one chunk carries, in the order a reader should apply them, appended to
    `events` if given.

    On every token's path: it looks keys up only where they are present and iterates the delta
    once, rather than probing every field a delta might have.
    """
    if events is None:
        events = []
    error = chunk.get("error")
    if error:
        events.append(ErrorEvent(error_info(error)))
    if "type" in chunk:
        kind = chunk["type"]
        if isinstance(kind, str) and kind.startswith("image_generation."):
            if not error:
                _image_frame(kind, chunk, events)
            return events
    choices = chunk.get("choices")
    if choices and type(choices) is list:
        choice = choices[0]
        if type(choice) is not dict or choice.get("index", 0) != 0:
            choice = next((c for c in choices if type(c) is dict and c.get("index") == 0), None)
        if choice is not None:
            delta = choice.get("delta")
            if delta is not None:
                if delta and type(delta) is dict:
                    _delta(delta, events)
            else:
                text = choice.get("text")  # text completions
                if text and type(text) is str:
                    events.append(TextDelta(text))
            reason = choice.get("finish_reason")
            if reason and type(reason) is str:
                events.append(Finish(reason))
    if "usage" in chunk:
        usage = chunk["usage"]
        if type(usage) is dict:
            events.append(parse_usage(usage))
    elif "x_groq" in chunk:  # Groq reported usage only under its own key before it copied it
        vendor = chunk["x_groq"]
        if type(vendor) is dict and type(usage := vendor.get("usage")) is dict:
            events.append(parse_usage(usage))
    return events


def _delta(delta: dict[str, Any], events: list[Event]) -> None:
    reasoning_seen = False
    for key, value in delta.items():
        if key == "content":
            if value and type(value) is str:
                events.append(TextDelta(value))
            elif value:
                if type(value) is list:
                    _content_parts(value, events)
                else:
                    events.append(Unread(key, value))
        elif key == "role":
            continue
        elif key == "reasoning" or key == "reasoning_content":
            # Read one representation: the first visible field, not the other nor the details.
            if value and type(value) is str and not reasoning_seen:
                reasoning_seen = True
                events.append(ReasoningDelta(value))
        elif key == "reasoning_details":
            visible = delta.get("reasoning") or delta.get("reasoning_content")
            _details(value, isinstance(visible, str) and bool(visible), events)
        elif key == "tool_calls":
            _tool_calls(value, events)
        elif key == "annotations":
            _annotations(value, events)
        elif key == "artifacts":
            _artifacts(value, events)
        elif key == "images":
            _images(value, events)
        elif key == "audio" and type(value) is dict:
            events.append(
                AudioOutput(
                    data=value.get("data") or "",
                    transcript=value.get("transcript") or "",
                    format=value.get("format"),
                )
            )
        elif value and key not in _CARRY_NOTHING:
            events.append(Unread(key, value))


def _content_parts(parts: list[Any], events: list[Event], reasoning: bool = False) -> None:
    """Typed content parts, in order. A `text` part's `text` is answer (reasoning inside a
    thinking part); a `thinking` part's `thinking` is reasoning, as a string or a list of text
    parts. Any other non-empty part is kept as `Unread`."""
    for part in parts:
        kind = part.get("type") if type(part) is dict else None
        if kind == "text" or (kind == "thinking" and not reasoning):
            value = part.get(kind)
            if value is None:
                continue
            if type(value) is str:
                if value:
                    if reasoning or kind == "thinking":
                        events.append(ReasoningDelta(value))
                    else:
                        events.append(TextDelta(value))
                continue
            if kind == "thinking" and type(value) is list:
                _content_parts(value, events, reasoning=True)
                continue
        if part:
            events.append(Unread("content", part))


def _details(details: Any, has_visible: bool, events: list[Event]) -> None:
    if not isinstance(details, list):
        return
    for detail in details:
        if not isinstance(detail, dict):
            continue
        if not has_visible:
            text = _detail_text(detail)
            if text:
                events.append(ReasoningDelta(text))
        events.append(ReasoningDetail(detail))


def _tool_calls(calls: Any, events: list[Event]) -> None:
    if not isinstance(calls, list):
        return
    for call in calls:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        index = call.get("index", 0)
        arguments = function.get("arguments")
        events.append(
            ToolCallDelta(
                index=index if type(index) is int else 0,
                id=call.get("id"),
                name=function.get("name"),
                arguments=arguments if isinstance(arguments, str) else "",
            )
        )


def _artifacts(items: Any, events: list[Event]) -> None:
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("data"), str):
            events.append(
                Artifact(
                    type=str(item.get("type") or "file"),
                    filename=str(item.get("filename") or "file"),
                    media_type=str(item.get("media_type") or "application/octet-stream"),
                    data=item["data"],
                )
            )


def _images(items: Any, events: list[Event]) -> None:
    for position, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict):
            image_url = item.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else None
            if isinstance(url, str):
                index = item.get("index", position)
                events.append(ImageOutput(index=index if type(index) is int else position, url=url))


def _detail_text(detail: dict[str, Any]) -> str | None:
    """Visible text of a reasoning_details entry: text and summaries, never encrypted data."""
    kind = detail.get("type")
    if kind == "reasoning.text":
        text = detail.get("text")
    elif kind == "reasoning.summary":
        text = detail.get("summary")
    else:
        return None
    return text if isinstance(text, str) else None


def _annotations(items: Any, events: list[Event]) -> None:
    if not isinstance(items, list):
        return
    for item in items:
        if isinstance(item, dict):
            annotation = parse_annotation(item)
            if annotation is not None:
                events.append(annotation)


def parse_annotation(item: dict[str, Any]) -> Annotation | None:
    """A citation entry of any shape gateways send → `Annotation`, or None to drop it.

    The body is `item[item["type"]]`, else `item["url_citation"]`, else the entry itself; `title`
    is the body's `title` or `filename`. An entry whose URL fails `citation_url` is dropped, as is
    a URL citation without a URL.
    """
    kind = item.get("type")
    if not isinstance(kind, str):
        kind = ""
    nested = item.get(kind) if kind else None
    if not isinstance(nested, dict):
        nested = item.get("url_citation")
    body: dict[str, Any] = nested if isinstance(nested, dict) else item
    url = body.get("url")
    title = body.get("title") or body.get("filename")
    if url is not None:
        url = citation_url(url)
        if url is None:
            return None  # never keep a link we would not follow
    elif kind == "url_citation" or body is item.get("url_citation"):
        return None
    return Annotation(kind, url, title if isinstance(title, str) else None, item)


def citation_url(url: Any) -> str | None:
    """The URL if it is http(s) and at most 8,192 UTF-8 bytes, else None. Never fetched."""
    if not isinstance(url, str):
        return None
    scheme, colon, _ = url.partition(":")
    if not colon or scheme.strip().lower() not in ("http", "https") or scheme != scheme.strip():
        return None
    if len(url.encode("utf-8")) > MAX_CITATION_URL_BYTES:
        return None
    if any(ord(char) < 0x20 or char in " \x7f" for char in url):
        return None
    return url


def _image_frame(kind: str, frame: dict[str, Any], events: list[Event]) -> None:
    if kind in ("image_generation.partial", "image_generation.completed"):
        b64 = frame.get("b64_json")
        if isinstance(b64, str):
            events.append(
                ImageOutput(
                    index=frame.get("index", 0),
                    b64=b64,
                    media_type=frame.get("media_type") or "image/png",
                    partial=kind == "image_generation.partial",
                )
            )
    elif kind == "image_generation.usage" and isinstance(frame.get("usage"), dict):
        events.append(parse_usage(frame["usage"]))
    elif kind == "image_generation.error":
        events.append(ErrorEvent(error_info(frame.get("error") or {"message": "image error"})))


def parse_usage(usage: dict[str, Any]) -> Usage:
    cost: Cost | None = None
    estimated = bool(usage.get("x_llm_usage_estimated", False))
    amount = usage.get("cost")
    if _is_number(amount):
        cost = Cost(amount, "credits", estimated)
    else:
        micro = usage.get("x_llm_cost_micro")
        if _is_number(micro):
            cost = Cost(micro, "micro_usd", estimated)
    completion_details = usage.get("completion_tokens_details")
    prompt_details = usage.get("prompt_tokens_details")
    if not isinstance(completion_details, dict):
        completion_details = {}
    if not isinstance(prompt_details, dict):
        prompt_details = {}
    return Usage(
        raw=usage,
        cost=cost,
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
        cached_tokens=_int(prompt_details.get("cached_tokens")),
    )


def error_info(error: Any, *, status: int | None = None) -> ErrorInfo:
    """An `error` object of any documented shape → `ErrorInfo`.

    Numes: `{code: int, message, metadata: {error_type}}`; Osmexo and tiny-3b: `{type, code: str,
    message, request_id}`; Nodul: `{code: int, message}`; image streams: `{code: <type>, message,
    status}`; Groq: `{code: str, type, message, status_code}`. A bare string is taken as the
    message. Without an explicit `status`, the error's own `status` or `status_code` is used, else a
    numeric `code` in the HTTP range (100-599).
    """
    if not isinstance(error, dict):
        return ErrorInfo(status, None, None, str(error) if error else "unknown error")
    code = error.get("code")
    metadata = error.get("metadata")
    kind = error.get("type")
    if not kind and isinstance(metadata, dict):
        kind = metadata.get("error_type")
    own_status = _http_status(error.get("status"))
    if own_status is None:
        own_status = _http_status(error.get("status_code"))
    if status is None:
        status = own_status if own_status is not None else _http_status(code)
    if not kind and own_status is not None and isinstance(code, str):
        kind = code  # image frames: "error.code is the error type"
    message = error.get("message")
    request_id = error.get("request_id")
    return ErrorInfo(
        status=status,
        code=code if isinstance(code, int | str) and not isinstance(code, bool) else None,
        type=kind if isinstance(kind, str) else None,
        message=message if isinstance(message, str) and message else "unknown error",
        request_id=request_id if isinstance(request_id, str) else None,
    )


def _http_status(value: Any) -> int | None:
    return value if type(value) is int and 100 <= value <= 599 else None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
