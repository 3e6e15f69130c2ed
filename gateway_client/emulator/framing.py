"""The `Dialect` base class: OpenAI-style framing that each gateway's subclass adjusts.

A dialect answers every wire question the engines ask: ids, headers, chunk envelopes and choices,
the delta for each scripted piece, usage and cost, and error bodies before and after the stream
starts. What the app knows of a gateway too (its name, path, reasoning field, whether it reports
usage) comes from its `facts`, the entry of `gateway_client.dialects.DIALECTS`; the class
attributes are the switches only the framing needs. `dialects.py` holds the concrete gateways.
"""

from __future__ import annotations

import base64
import secrets
import string
from dataclasses import dataclass
from typing import Any, ClassVar

from ..dialects import DialectFacts
from .scenarios import Piece

__all__ = ["ALNUM", "Dialect", "ErrorReply", "Headers", "Ids", "rand_id"]

Headers = list[tuple[str, str]]
ALNUM = string.ascii_letters + string.digits
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def rand_id(alphabet: str, size: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(size))


@dataclass(frozen=True, slots=True)
class Ids:
    """`generation_id` is the chunk `id` and the record key; `request_id` the gateway's request."""

    generation_id: str
    request_id: str


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A non-200 JSON error response."""

    status: int
    body: dict[str, Any]
    headers: Headers


class Dialect:
    """Common OpenAI-style behaviour; subclasses override what their gateway does differently."""

    facts: ClassVar[DialectFacts]
    hosted_tools: ClassVar[bool] = True
    """Citations and image output; a small model answers with text instead."""
    media_output: ClassVar[bool] = False
    """Chat audio output (`delta.audio`) and hosted-tool files (`delta.artifacts`); only Numes
    documents them, the others answer those scenarios with text."""
    role_chunk: ClassVar[bool] = False
    """A separate `{"role":"assistant","content":""}` chunk opens the stream."""
    role_chunk_at_open: ClassVar[bool] = False
    """...sent as soon as the stream opens, rather than just before the first token."""
    silence_ends_stream: ClassVar[bool] = False
    """A gap of `Options.tiny_stall_s` between tokens ends the stream (tiny-3b); before the first
    token the gateway retries once, then gives up with an empty stream."""
    free_when_empty: ClassVar[bool] = False
    """A failure that delivered no token is not billed (tiny-3b)."""
    early_commit: ClassVar[bool] = True
    """Headers go out when the stream opens; False defers them to the first chunk."""
    keepalive: ClassVar[bytes | None] = None
    keepalive_at_open: ClassVar[bool] = False
    done_after_error: ClassVar[bool] = True
    stall_limit_s: ClassVar[float] = 600.0
    completion_endpoint: ClassVar[bool] = False
    tool_open_arguments: ClassVar[bool] = True
    prices: ClassVar[tuple[float, float]] = (0.0, 0.0)
    """(per prompt token, per completion token) in the gateway's billing unit."""
    listed_prices: ClassVar[bool] = False
    """Its `/models` entries carry OpenRouter-style `pricing`; the others list `capabilities`."""
    errors: ClassVar[dict[str, tuple[int, str, str]]] = {}
    """kind -> (status, type or error_type, code or message) as the subclass defines."""

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def reasoning_field(self) -> str | None:
        return self.facts.reasoning_field

    # ---- identity --------------------------------------------------------------------------
    def new_ids(self, *, text_completion: bool) -> Ids:
        request_id = "req_" + rand_id(_CROCKFORD, 20)
        prefix = "cmpl-" if text_completion else "chatcmpl-"
        return Ids(prefix + rand_id(ALNUM, 24), request_id)

    def stream_headers(self, ids: Ids, model: str, estimate: float | int) -> Headers:
        return [("content-type", "text/event-stream"), ("cache-control", "no-cache")]

    def json_headers(self, ids: Ids, model: str, cost: float | int) -> Headers:
        return [("content-type", "application/json")]

    # ---- chunks ----------------------------------------------------------------------------
    def envelope(
        self, ids: Ids, model: str, created: int, *, first: bool, obj: str
    ) -> dict[str, Any]:
        return {"id": ids.generation_id, "object": obj, "created": created, "model": model}

    def choice(self, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "finish_reason": finish_reason}

    def text_choice(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}

    def reasoning_delta(self, text: str) -> dict[str, Any]:
        assert self.reasoning_field is not None
        return {self.reasoning_field: text}

    def reasoning_end_delta(self, seed: str) -> dict[str, Any] | None:
        """Fields sent once reasoning is complete (signatures); None sends nothing."""
        return None

    def delta(self, piece: Piece, seed: str) -> dict[str, Any] | None:
        """The delta fields for `piece`, or None if this gateway sends nothing for it."""
        match piece.kind:
            case "content":
                return {"content": piece.text}
            case "reasoning":
                return self.reasoning_delta(piece.text)
            case "reasoning_end":
                return self.reasoning_end_delta(seed)
            case "tool_open":
                function = {"name": piece.data["name"]}
                if self.tool_open_arguments:
                    function["arguments"] = ""
                call = {"index": piece.index, "id": piece.data["id"], "type": "function"}
                return {"tool_calls": [{**call, "function": function}]}
            case "tool_args":
                return {
                    "tool_calls": [{"index": piece.index, "function": {"arguments": piece.text}}]
                }
            case "annotations":
                return {"annotations": piece.data}
            case "images":
                images = [
                    {"index": i, "type": "image_url", "image_url": {"url": image["url"]}}
                    for i, image in enumerate(piece.data)
                ]
                return {"images": images}
            case "audio":
                data = base64.b64encode(piece.data).decode("ascii")
                return {"audio": {"data": data, "transcript": piece.text, "format": "wav"}}
            case "artifacts":
                return {"artifacts": piece.data}
        return None

    def message_reasoning(self, text: str, seed: str) -> dict[str, Any]:
        """Reasoning fields of a non-streamed `message`."""
        return {self.reasoning_field: text} if self.reasoning_field and text else {}

    # ---- usage and cost --------------------------------------------------------------------
    def cost(self, prompt: int, completion: int) -> float | int:
        return round(prompt * self.prices[0] + completion * self.prices[1], 12)

    def usage(
        self, prompt: int, completion: int, reasoning: int, *, estimated: bool
    ) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        usage["cost"] = self.cost(prompt, completion)
        return usage

    # ---- errors ----------------------------------------------------------------------------
    def error_code(self, kind: str) -> int | str:
        """The `code` this gateway's error body carries for `kind`."""
        return self.errors[kind][0]

    def error_body(self, kind: str, ids: Ids, message: str | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def error_reply(self, kind: str, ids: Ids, message: str | None = None) -> ErrorReply:
        status = self.errors[kind][0]
        headers: Headers = [("content-type", "application/json")]
        if status in (429, 503):
            headers.append(("retry-after", "1"))
        return ErrorReply(status, self.error_body(kind, ids, message), headers)

    def inband_error(self, kind: str, ids: Ids, model: str, created: int) -> dict[str, Any]:
        """The in-band error event for `kind` (`midstream` or `stall`)."""
        return self.error_body(kind, ids)
