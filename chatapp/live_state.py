"""The running state of one answer: what browsers were sent up to `seq`, and what is pending.

Events from the gateway only append to the pending buffers (cheap, per token). Every ~50 ms the
worker takes the pending part as one sequence-numbered delta, so the channel layer carries a few
messages a second whatever the token rate, and never the whole message. A snapshot is the sent
part with its `seq`: a browser that applies later deltas on top of it sees no gap and no
duplicate. Nothing here knows Django, so it is tested as a pure fold.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from gateway_client.events import (
    Annotation,
    Artifact,
    AudioOutput,
    Finish,
    ImageOutput,
    Meta,
    ReasoningDelta,
    ReasoningDetail,
    TextDelta,
    ToolCallDelta,
    Usage,
)

# Raster formats only: an SVG can carry script.
SAFE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(slots=True)
class _Buffers:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any(
            (self.content, self.reasoning, self.tool_calls, self.annotations, self.attachments)
        )


def merge_tool_call(calls: dict[int, dict[str, Any]], fragment: dict[str, Any]) -> None:
    slot = calls.setdefault(
        fragment["index"], {"index": fragment["index"], "id": None, "name": None, "arguments": ""}
    )
    slot["id"] = fragment.get("id") or slot["id"]
    slot["name"] = fragment.get("name") or slot["name"]
    slot["arguments"] += fragment.get("arguments") or ""


def image_attachment(event: ImageOutput) -> dict[str, Any] | None:
    """A displayable image, or None for previews and anything that is not a raster image."""
    if event.partial:
        return None
    if event.url:
        url = event.url
        if url.startswith("data:"):
            media_type = url[5:].split(";", 1)[0].split(",", 1)[0].lower()
            if media_type not in SAFE_IMAGE_TYPES:
                return None
        elif not url.startswith("https://"):
            return None
        return {"kind": "image", "url": url}
    if event.b64 and (event.media_type or "").lower() in SAFE_IMAGE_TYPES:
        return {"kind": "image", "url": f"data:{event.media_type};base64,{event.b64}"}
    return None


def _b64decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return b""


@dataclass(slots=True)
class LiveState:
    seq: int = 0
    sent: _Buffers = field(default_factory=_Buffers)
    pending: _Buffers = field(default_factory=_Buffers)
    generation_id: str | None = None
    served_model: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    reasoning_details: list[dict[str, Any]] = field(default_factory=list)
    audio_pieces: list[bytes] = field(default_factory=list)
    audio_transcript: list[str] = field(default_factory=list)
    audio_format: str | None = None
    has_output: bool = False

    def apply(self, event: object) -> bool:
        """Fold one event in; True when it is the first visible output (time to first token)."""
        first = not self.has_output
        match event:
            case TextDelta(text=text):
                if not text:
                    return False
                self.pending.content.append(text)
            case ReasoningDelta(text=text):
                if not text:
                    return False
                self.pending.reasoning.append(text)
            case ToolCallDelta():
                merge_tool_call(
                    self.pending.tool_calls,
                    {
                        "index": event.index,
                        "id": event.id,
                        "name": event.name,
                        "arguments": event.arguments,
                    },
                )
            case ReasoningDetail(detail=detail):
                self.reasoning_details.append(detail)
                return False
            case Annotation():
                self.pending.annotations.append(
                    {"type": event.type, "url": event.url, "title": event.title, "raw": event.raw}
                )
            case ImageOutput():
                attachment = image_attachment(event)
                if attachment is None:
                    return False
                self.pending.attachments.append(attachment)
            case Artifact():
                self.pending.attachments.append(
                    {
                        "kind": "file",
                        "artifact_type": event.type,
                        "filename": event.filename,
                        "media_type": event.media_type,
                        "data": event.data,
                    }
                )
            case AudioOutput():
                if event.data:
                    self.audio_pieces.append(_b64decode(event.data))
                if event.transcript:
                    self.audio_transcript.append(event.transcript)
                self.audio_format = event.format or self.audio_format
            case Meta(id=gen_id, model=model):
                self.generation_id = self.generation_id or gen_id
                self.served_model = model or self.served_model
                return False
            case Usage():
                self.usage = event
                return False
            case Finish(reason=reason):
                self.finish_reason = reason
                return False
            case _:
                return False
        self.has_output = True
        return first

    def take_delta(self) -> dict[str, Any] | None:
        """Move what is pending to `sent` and return it as the next numbered delta, if any."""
        pending = self.pending
        if not pending:
            return None
        self.pending = _Buffers()
        self.seq += 1
        delta: dict[str, Any] = {"seq": self.seq}
        if pending.content:
            text = "".join(pending.content)
            self.sent.content.append(text)
            delta["content"] = text
        if pending.reasoning:
            text = "".join(pending.reasoning)
            self.sent.reasoning.append(text)
            delta["reasoning"] = text
        if pending.tool_calls:
            fragments = [pending.tool_calls[i] for i in sorted(pending.tool_calls)]
            for fragment in fragments:
                merge_tool_call(self.sent.tool_calls, fragment)
            delta["tool_calls"] = fragments
        if pending.annotations:
            self.sent.annotations.extend(pending.annotations)
            delta["annotations"] = [public_annotation(a) for a in pending.annotations]
        if pending.attachments:
            self.sent.attachments.extend(pending.attachments)
            delta["attachments"] = [a["kind"] for a in pending.attachments]
        return delta

    @property
    def content(self) -> str:
        return "".join(self.sent.content)

    @property
    def reasoning(self) -> str:
        return "".join(self.sent.reasoning)

    def tool_calls(self) -> list[dict[str, Any]]:
        return [dict(self.sent.tool_calls[i]) for i in sorted(self.sent.tool_calls)]

    def snapshot(self) -> dict[str, Any]:
        """Everything sent so far, numbered: a browser may replace its copy with this."""
        return {
            "seq": self.seq,
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": self.tool_calls(),
            "annotations": [public_annotation(a) for a in self.sent.annotations],
            "attachments": [a["kind"] for a in self.sent.attachments],
        }

    def attachments(self) -> list[dict[str, Any]]:
        """Attachments to persist, with the audio pieces joined into one clip."""
        result = list(self.sent.attachments)
        if self.audio_pieces or self.audio_transcript:
            fmt = self.audio_format or "wav"
            result.append(
                {
                    "kind": "audio",
                    "media_type": f"audio/{fmt}",
                    "data": base64.b64encode(b"".join(self.audio_pieces)).decode("ascii"),
                    "transcript": "".join(self.audio_transcript),
                }
            )
        return result


def public_annotation(annotation: dict[str, Any]) -> dict[str, Any]:
    """What a browser needs of a citation (the raw entry stays on the server)."""
    return {"url": annotation.get("url"), "title": annotation.get("title")}
