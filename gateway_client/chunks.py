"""One decoded chunk → typed events, for every dialect the gateways speak.

The dialects differ only in details, so one reader handles them all by field presence rather than
by a dialect switch: `reasoning` or `reasoning_content` (Numes repeats the same text as a
`reasoning.text` entry of `reasoning_details`, so visible text is read from one representation per
chunk), `usage.cost` or `usage.x_llm_cost_micro`, and in-band errors with or without `choices`,
with an int or a string `code`. `error` is checked before `choices`, as every gateway asks.
Image-stream frames (`image_generation.*`) and text completions (`text`) come through here too.
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
    Usage,
)

__all__ = ["MAX_CITATION_URL_BYTES", "error_info", "parse_chunk", "parse_usage", "safe_url"]

MAX_CITATION_URL_BYTES = 8192


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
    return events


def _delta(delta: dict[str, Any], events: list[Event]) -> None:
    reasoning_seen = False
    for key, value in delta.items():
        if key == "content":
            if value and type(value) is str:
                events.append(TextDelta(value))
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
        if not isinstance(item, dict):
            continue
        kind = str(item.get("type") or "")
        nested = item.get(kind)
        body: dict[str, Any] = nested if isinstance(nested, dict) else item
        url = body.get("url")
        title = body.get("title") or body.get("filename")
        if url is not None:
            url = safe_url(url)
            if url is None:
                continue  # never keep a link we would not follow
        elif kind == "url_citation":
            continue
        events.append(Annotation(kind, url, title if isinstance(title, str) else None, item))


def safe_url(url: Any) -> str | None:
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
    status}`. A bare string is taken as the message.
    """
    if not isinstance(error, dict):
        return ErrorInfo(status, None, None, str(error) if error else "unknown error")
    code = error.get("code")
    metadata = error.get("metadata")
    kind = error.get("type")
    if not kind and isinstance(metadata, dict):
        kind = metadata.get("error_type")
    own_status = error.get("status")
    if status is None:
        if isinstance(own_status, int):
            status = own_status
        elif isinstance(code, int) and 100 <= code <= 599:
            status = code
    if not kind and isinstance(own_status, int) and isinstance(code, str):
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


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
