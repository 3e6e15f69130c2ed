"""A pure fold of typed events into a `Completion`: the answer as it stands at any moment.

Adding an event is O(1) (text fragments go to lists, joined only when a `Completion` is asked
for), so the live client can fold every event and still hand out a snapshot whenever the app
flushes. The outcome follows the gateways' shared rule: `complete` needs `[DONE]` and no error;
an error event (or a transport failure reported with `fail`) makes it `error`; anything else that
ends is `incomplete`.

What the reader skipped (`Unread` events) is kept, up to `MAX_UNREAD` entries, and a complete
stream that produced no output at all but skipped something says so in `warnings`
(`"unread_parts"`), so a chunk shape we do not understand never passes for an empty answer. The
first skipped content of a stream (an unknown part type, say) is also logged, once.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from .error_info import ErrorInfo
from .events import (
    Annotation,
    Artifact,
    AudioOutput,
    Cost,
    Done,
    ErrorEvent,
    Event,
    Finish,
    ImageOutput,
    Meta,
    ReasoningDelta,
    ReasoningDetail,
    TextDelta,
    ToolCallDelta,
    Unread,
    Usage,
)

__all__ = ["MAX_UNREAD", "Accumulator", "Completion", "Outcome", "ToolCall"]

# How a stream ended: `[DONE]` and no error; an error; or neither.
type Outcome = Literal["complete", "error", "incomplete"]

MAX_UNREAD = 20

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolCall:
    index: int
    id: str | None
    name: str | None
    arguments: str  # the raw concatenated fragments; parse only after the finish chunk

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class Completion:
    outcome: Outcome
    status: int | None = None
    generation_id: str | None = None
    request_id: str | None = None
    model: str | None = None
    finish_reason: str | None = None
    content: str = ""
    reasoning: str = ""
    reasoning_details: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)
    images: list[ImageOutput] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    audio: AudioOutput | None = None
    usage: dict[str, Any] | None = None
    cost: Cost | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    error: ErrorInfo | None = None
    warnings: tuple[str, ...] = ()  # machine codes: "unread_parts"
    unread: list[dict[str, Any]] = field(default_factory=list)  # {"field", "value"}, capped

    def to_dict(self) -> dict[str, Any]:
        """What `replay` prints, as the conformance cases in `tests/fixtures/streams` expect it
        (each `.expect.json` holds fields it must print), plus media, `warnings` and `unread`."""
        return {
            "status": self.status,
            "outcome": self.outcome,
            "generation_id": self.generation_id,
            "request_id": self.request_id,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "content": self.content,
            "reasoning": self.reasoning,
            "reasoning_details": self.reasoning_details,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "annotations": [annotation.raw for annotation in self.annotations],
            "usage": self.usage,
            "cost": self.cost.to_dict() if self.cost else None,
            "error": self.error.to_dict() if self.error else None,
            "images": [_image_dict(image) for image in self.images],
            "artifacts": [
                {"type": a.type, "filename": a.filename, "media_type": a.media_type, "data": a.data}
                for a in self.artifacts
            ],
            "audio": (
                {
                    "format": self.audio.format,
                    "transcript": self.audio.transcript,
                    "data": self.audio.data,
                }
                if self.audio
                else None
            ),
            "warnings": list(self.warnings),
            "unread": self.unread,
        }


def _image_dict(image: ImageOutput) -> dict[str, Any]:
    return {
        "index": image.index,
        "url": image.url,
        "b64": image.b64,
        "media_type": image.media_type,
        "partial": image.partial,
    }


class Accumulator:
    """Folds events in arrival order. Not thread-safe; one per stream."""

    def __init__(
        self,
        *,
        status: int | None = 200,
        generation_id: str | None = None,
        request_id: str | None = None,
        served_model: str | None = None,
    ) -> None:
        self.status = status
        self.generation_id = generation_id
        self.request_id = request_id
        # A gateway's header naming the model behind an alias outranks the chunks' `model`.
        self.model: str | None = served_model
        self._model_from_header = served_model is not None
        self.finish_reason: str | None = None
        self.done = False
        self.error: ErrorInfo | None = None
        self.usage: Usage | None = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._details: list[dict[str, Any]] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument fragments]]
        self._annotations: list[Annotation] = []
        self._images: dict[int, ImageOutput] = {}
        self._artifacts: list[Artifact] = []
        self._audio: list[bytes] = []
        self._transcript: list[str] = []
        self._audio_format: str | None = None
        self._has_audio = False
        self._unread: list[dict[str, Any]] = []
        self._logged_unread = False

    def add(self, event: Event) -> None:
        match event:
            case TextDelta(text=text):
                self._content.append(text)
            case ReasoningDelta(text=text):
                self._reasoning.append(text)
            case ReasoningDetail(detail=detail):
                self._details.append(detail)
            case ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments):
                slot = self._calls.get(index)
                if slot is None:
                    slot = self._calls[index] = [call_id, name, []]
                else:
                    slot[0] = slot[0] or call_id
                    slot[1] = slot[1] or name
                if arguments:
                    slot[2].append(arguments)
            case Meta(id=chunk_id, model=model):
                if self.generation_id is None and chunk_id:
                    self.generation_id = chunk_id
                if not self._model_from_header:
                    self.model = model or self.model
            case Finish(reason=reason):
                self.finish_reason = reason
            case Usage():
                self.usage = event
            case Annotation():
                self._annotations.append(event)
            case ImageOutput(index=index):
                self._images[index] = event  # a completed image replaces its previews
            case Artifact():
                self._artifacts.append(event)
            case AudioOutput():
                self._add_audio(event)
            case ErrorEvent(info=info):
                self.error = self.error or info
            case Done():
                self.done = True
            case Unread():
                self._add_unread(event)

    def fail(self, info: ErrorInfo) -> None:
        """Record a failure the events could not carry (timeout, dropped connection, cap)."""
        if self.error is None:
            self.error = info

    @property
    def content(self) -> str:
        return "".join(self._content)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls so far, without building the whole `completion` (a live answer's
        state is read once a second for the disk)."""
        return [
            ToolCall(index, slot[0], slot[1], "".join(slot[2]))
            for index, slot in sorted(self._calls.items())
        ]

    @property
    def annotations(self) -> list[Annotation]:
        """The citations so far (a copy), without building the whole `completion`."""
        return list(self._annotations)

    @property
    def outcome(self) -> Outcome:
        if self.error is not None:
            return "error"
        return "complete" if self.done else "incomplete"

    @property
    def completion(self) -> Completion:
        usage = self.usage
        return Completion(
            outcome=self.outcome,
            status=self.status,
            generation_id=self.generation_id,
            request_id=self.request_id,
            model=self.model,
            finish_reason=self.finish_reason,
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            reasoning_details=list(self._details),
            tool_calls=self.tool_calls,
            annotations=list(self._annotations),
            images=[self._images[index] for index in sorted(self._images)],
            artifacts=list(self._artifacts),
            audio=self._audio_output(),
            usage=usage.raw if usage else None,
            cost=usage.cost if usage else None,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            reasoning_tokens=usage.reasoning_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            error=self.error,
            warnings=self._warnings(),
            unread=list(self._unread),
        )

    def _add_unread(self, event: Unread) -> None:
        if len(self._unread) < MAX_UNREAD:
            self._unread.append({"field": event.field, "value": event.value})
        if event.field == "content" and not self._logged_unread:
            self._logged_unread = True
            value = event.value
            what = (
                f"a part of type {value.get('type')!r}"
                if isinstance(value, dict)
                else f"a {type(value).__name__} value"
            )
            logger.warning(
                "generation %s: skipped content we do not read (%s); kept in Completion.unread",
                self.generation_id,
                what,
            )

    def _warnings(self) -> tuple[str, ...]:
        if not self._unread or not self.done or self.error is not None:
            return ()
        if any(self._content) or any(self._reasoning) or self._calls:
            return ()
        if self._images or self._artifacts or self._has_audio:
            return ()
        return ("unread_parts",)

    def _add_audio(self, event: AudioOutput) -> None:
        self._has_audio = True
        if event.data:
            # A corrupt piece is dropped; the transcript still stands.
            with contextlib.suppress(binascii.Error, ValueError):
                self._audio.append(base64.b64decode(event.data, validate=True))
        if event.transcript:
            self._transcript.append(event.transcript)
        self._audio_format = event.format or self._audio_format

    def _audio_output(self) -> AudioOutput | None:
        if not self._has_audio:
            return None
        data = base64.b64encode(b"".join(self._audio)).decode("ascii")
        return AudioOutput(data, "".join(self._transcript), self._audio_format)
