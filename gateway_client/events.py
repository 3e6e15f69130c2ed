"""Typed events: what one gateway chunk means, whatever dialect sent it.

`chunks.parse_chunk` turns each decoded chunk into a few of these; the accumulator folds them into
a `Completion`; the chat app forwards them to browsers. They are frozen and slotted because
several are made per token, and `match` on their class is how consumers dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .error_info import ErrorInfo

__all__ = [
    "Annotation",
    "Artifact",
    "AudioOutput",
    "Cost",
    "Done",
    "ErrorEvent",
    "Event",
    "Finish",
    "ImageOutput",
    "Meta",
    "ReasoningDelta",
    "ReasoningDetail",
    "TextDelta",
    "ToolCallDelta",
    "Unread",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class Meta:
    """The chunk `id` (the generation ID on most gateways) and `model`, when seen or changed."""

    id: str | None
    model: str | None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """The next fragment of the answer (`delta.content`, or `text` for text completions)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """The next fragment of visible reasoning, whichever field carried it (read once)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDetail:
    """One `reasoning_details` entry exactly as received, to send back unchanged."""

    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call. Fragments after the first for an `index` omit id and name."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class Annotation:
    """A citation, read once: `url` and `title` come from the entry's nested body (`entry[type]`,
    else `entry["url_citation"]`, else the entry itself; `title` falls back to `filename`).

    `url` is http(s) and at most 8,192 UTF-8 bytes, or the annotation is dropped; it is None only
    for citations that have no URL (file citations). `raw` is the entry as received, to send back.
    """

    type: str
    url: str | None
    title: str | None
    raw: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Artifact:
    """An inline file from a hosted tool; `data` is base64."""

    type: str
    filename: str
    media_type: str
    data: str


@dataclass(frozen=True, slots=True)
class ImageOutput:
    """An image from chat output or an image stream.

    `url` is what chat output sends (usually a `data:` URL); image streams send `b64` with a
    `media_type`. `partial` marks an image stream's progress preview.
    """

    index: int
    url: str | None = None
    b64: str | None = None
    media_type: str | None = None
    partial: bool = False


@dataclass(frozen=True, slots=True)
class AudioOutput:
    """A piece of chat audio output: base64 `data`, a `transcript` fragment and the `format`."""

    data: str
    transcript: str
    format: str | None


@dataclass(frozen=True, slots=True)
class Cost:
    """What the gateway charged. `unit`: `credits` for `usage.cost` (the key's currency: credits,
    satoshis, PnP), `micro_usd` for `usage.x_llm_cost_micro`."""

    amount: float | int
    unit: str
    estimated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"amount": self.amount, "unit": self.unit, "estimated": self.estimated}


@dataclass(frozen=True, slots=True)
class Usage:
    """The usage object as received, plus the fields the app records."""

    raw: dict[str, Any]
    cost: Cost | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """`finish_reason` was set: `stop`, `length`, `tool_calls`, `content_filter`, `error`, ..."""

    reason: str


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The stream failed: an in-band error from the gateway, or (`info.type == "protocol_error"`
    or `"limit_exceeded"`) bytes that are not the protocol. Nothing after it counts."""

    info: ErrorInfo


@dataclass(frozen=True, slots=True)
class Unread:
    """A non-empty delta field the reader skipped: a key it does not read, a content part of an
    unknown type (`field` is `"content"`, `value` the part), or content of another JSON type.

    Kept so an answer that came out empty can say what arrived instead of it.
    """

    field: str
    value: Any


@dataclass(frozen=True, slots=True)
class Done:
    """`data: [DONE]`: the stream finished. Anything after it is ignored."""


type Event = (
    Meta
    | TextDelta
    | ReasoningDelta
    | ReasoningDetail
    | ToolCallDelta
    | Annotation
    | Artifact
    | ImageOutput
    | AudioOutput
    | Usage
    | Finish
    | ErrorEvent
    | Unread
    | Done
)
