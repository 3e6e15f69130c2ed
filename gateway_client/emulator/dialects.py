"""The four gateways' framing: headers, IDs, chunk envelopes, deltas, usage, prices, errors.

Each `Dialect` subclass encodes one gateway's streaming documentation (most conformance cases in
`tests/fixtures/streams` are its examples): what its first chunk looks like, whether it sends
keep-alive comments, and how it reports errors before and after the stream starts; its `facts`
(`gateway_client.dialects.DIALECTS`) give its name, path, reasoning field and usage chunk. The
engines are dialect-agnostic and ask these objects for every byte.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from ..dialects import DIALECTS as FACTS
from .framing import ALNUM, Dialect, ErrorReply, Headers, Ids, rand_id

__all__ = ["DIALECTS", "Dialect", "ErrorReply", "Ids", "Nodul", "Numes", "Osmexo", "Tiny"]


class Numes(Dialect):
    """OpenRouter-compatible: UUID generation ids, reasoning twice, no keep-alives."""

    facts = FACTS["numes"]
    media_output = True
    early_commit = False
    listed_prices = True
    prices = (2e-7, 8e-7)
    tool_open_arguments = False
    errors = {
        "unauthorized": (401, "unauthorized", "No auth credentials found"),
        "bad_request": (400, "invalid_request", "Invalid request"),
        "model_not_found": (400, "invalid_model", "Model not found"),
        "not_found": (404, "not_found", "Not Found"),
        "before": (402, "insufficient_credits", "Insufficient credits"),
        "midstream": (503, "provider_unavailable", "provider became unavailable"),
        "stall": (408, "timeout", "The request reached its time limit"),
    }

    def new_ids(self, *, text_completion: bool) -> Ids:
        return Ids(str(uuid.uuid4()), "req-" + uuid.uuid4().hex[:20])

    def stream_headers(self, ids: Ids, model: str, estimate: float | int) -> Headers:
        return [
            *super().stream_headers(ids, model, estimate),
            ("x-request-id", ids.request_id),
            ("x-generation-id", ids.generation_id),
        ]

    def json_headers(self, ids: Ids, model: str, cost: float | int) -> Headers:
        return [
            ("content-type", "application/json"),
            ("x-request-id", ids.request_id),
            ("x-generation-id", ids.generation_id),
        ]

    def reasoning_delta(self, text: str) -> dict[str, Any]:
        return {"reasoning": text, "reasoning_details": [{"type": "reasoning.text", "text": text}]}

    def _signed(self, seed: str) -> list[dict[str, Any]]:
        signature = uuid.uuid5(uuid.NAMESPACE_URL, seed).hex * 2
        return [
            {"type": "reasoning.text", "signature": signature, "format": "anthropic-claude-v1"},
            {
                "type": "reasoning.encrypted",
                "data": "ZW11bGF0b3I6" + uuid.uuid5(uuid.NAMESPACE_OID, seed).hex,
                "format": "anthropic-claude-v1",
            },
        ]

    def reasoning_end_delta(self, seed: str) -> dict[str, Any] | None:
        return {"reasoning_details": self._signed(seed)}

    def message_reasoning(self, text: str, seed: str) -> dict[str, Any]:
        if not text:
            return {}
        details = [{"type": "reasoning.text", "text": text}, *self._signed(seed)]
        return {"reasoning": text, "reasoning_details": details}

    def usage(
        self, prompt: int, completion: int, reasoning: int, *, estimated: bool
    ) -> dict[str, Any]:
        cost = self.cost(prompt, completion)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "cost": cost,
            "is_byok": False,
            "prompt_tokens_details": {"cached_tokens": 0},
            "cost_details": {"upstream_inference_cost": cost},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }

    def error_body(self, kind: str, ids: Ids, message: str | None = None) -> dict[str, Any]:
        status, error_type, default = self.errors[kind]
        error = {
            "code": status,
            "message": message or default,
            "metadata": {"error_type": error_type},
        }
        return {"error": error}

    def error_reply(self, kind: str, ids: Ids, message: str | None = None) -> ErrorReply:
        reply = super().error_reply(kind, ids, message)
        return ErrorReply(
            reply.status, reply.body, [*reply.headers, ("x-request-id", ids.request_id)]
        )

    def inband_error(self, kind: str, ids: Ids, model: str, created: int) -> dict[str, Any]:
        chunk = self.envelope(ids, model, created, first=False, obj="chat.completion.chunk")
        chunk.update(self.error_body(kind, ids))
        chunk["choices"] = [self.choice({"content": ""}, "error")]
        return chunk


class Osmexo(Dialect):
    """Role chunk with empty content, `reasoning_content`, `: ping`, micro-USD costs."""

    facts = FACTS["osmexo"]
    role_chunk = True
    keepalive = b": ping\n\n"
    stall_limit_s = 60.0
    completion_endpoint = True
    prices = (0.15, 0.6)
    errors = {
        "unauthorized": (401, "authentication_error", "invalid_api_key"),
        "bad_request": (400, "invalid_request_error", "invalid_request"),
        "model_not_found": (404, "invalid_request_error", "model_not_found"),
        "not_found": (404, "invalid_request_error", "not_found"),
        "before": (503, "provider_error", "provider_unavailable"),
        "midstream": (502, "provider_error", "stream_interrupted"),
        "stall": (504, "provider_error", "stream_interrupted"),
    }
    messages: ClassVar[dict[str, str]] = {
        "unauthorized": "Invalid or missing API key.",
        "bad_request": "Invalid request.",
        "model_not_found": "The model does not exist.",
        "not_found": "Not found.",
        "before": "All routes failed",
        "midstream": "upstream connection lost",
        "stall": "upstream idle timeout: no data for 60 s",
    }

    def stream_headers(self, ids: Ids, model: str, estimate: float | int) -> Headers:
        return [
            *super().stream_headers(ids, model, estimate),
            ("connection", "keep-alive"),
            ("x-accel-buffering", "no"),
            ("x-request-id", ids.request_id),
            ("x-llm-model", model),
            ("x-llm-cost-micro", str(int(estimate))),
        ]

    def json_headers(self, ids: Ids, model: str, cost: float | int) -> Headers:
        return [
            ("content-type", "application/json"),
            ("x-request-id", ids.request_id),
            ("x-llm-model", model),
            ("x-llm-cost-micro", str(int(cost))),
        ]

    def cost(self, prompt: int, completion: int) -> int:
        return round(prompt * self.prices[0] + completion * self.prices[1])

    def error_code(self, kind: str) -> int | str:
        return self.errors[kind][2]

    def usage(
        self, prompt: int, completion: int, reasoning: int, *, estimated: bool
    ) -> dict[str, Any]:
        usage = super().usage(prompt, completion, reasoning, estimated=estimated)
        del usage["cost"]
        usage["x_llm_cost_micro"] = self.cost(prompt, completion)
        usage["x_llm_usage_estimated"] = estimated
        return usage

    def error_body(self, kind: str, ids: Ids, message: str | None = None) -> dict[str, Any]:
        _, error_type, code = self.errors[kind]
        error = {"type": error_type, "code": code, "message": message or self.messages[kind]}
        return {"error": {**error, "request_id": ids.request_id}}

    def error_reply(self, kind: str, ids: Ids, message: str | None = None) -> ErrorReply:
        reply = super().error_reply(kind, ids, message)
        return ErrorReply(
            reply.status, reply.body, [*reply.headers, ("x-request-id", ids.request_id)]
        )


class Tiny(Dialect):
    """tiny-3b: no usage chunk ever, no reasoning, ids embed the request id, errors end the
    stream without `[DONE]`, and 2 s without a token ends a stream with `upstream_stall`."""

    facts = FACTS["tiny"]
    hosted_tools = False
    role_chunk = True
    role_chunk_at_open = True
    silence_ends_stream = True
    free_when_empty = True
    done_after_error = False
    stall_limit_s = 2.0
    completion_endpoint = True
    prices = (1e-7, 2e-7)
    errors = {
        "unauthorized": (401, "authentication_error", "invalid_api_key"),
        "bad_request": (400, "invalid_request_error", "invalid_request"),
        "model_not_found": (404, "invalid_request_error", "model_not_found"),
        "not_found": (404, "invalid_request_error", "not_found"),
        "before": (503, "server_error", "no_capacity"),
        "midstream": (502, "server_error", "upstream_failed"),
        "stall": (504, "server_error", "upstream_stall"),
    }
    messages: ClassVar[dict[str, str]] = {
        **Osmexo.messages,
        "before": "No node took the request.",
        "midstream": "The serving node started and did not finish.",
        "stall": "Upstream token stream stalled.",
    }

    def error_code(self, kind: str) -> int | str:
        return self.errors[kind][2]

    def new_ids(self, *, text_completion: bool) -> Ids:
        request_id = rand_id(ALNUM, 12)
        return Ids(("cmpl-" if text_completion else "chatcmpl-") + request_id, request_id)

    def choice(self, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        return {"index": 0, "finish_reason": finish_reason, "delta": delta}

    def text_choice(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        return {"index": 0, "finish_reason": finish_reason, "text": text}

    def usage(
        self, prompt: int, completion: int, reasoning: int, *, estimated: bool
    ) -> dict[str, Any]:
        """Only in non-streamed responses: a stream never reports its counts."""
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def error_body(self, kind: str, ids: Ids, message: str | None = None) -> dict[str, Any]:
        _, error_type, code = self.errors[kind]
        error = {"type": error_type, "code": code, "message": message or self.messages[kind]}
        return {"error": error}


class Nodul(Dialect):
    """`gen-` ids, `: keepalive` comments, sparse chunks (model only on the first, no `created`),
    costs in PnP, in-band errors with `finish_reason: "error"` and no `[DONE]`."""

    facts = FACTS["nodul"]
    keepalive = b": keepalive\n\n"
    keepalive_at_open = True
    done_after_error = False
    stall_limit_s = 120.0
    tool_open_arguments = False
    listed_prices = True
    prices = (3e-7, 9e-7)
    errors = {
        "unauthorized": (401, "", "Missing or invalid API key"),
        "bad_request": (400, "", "Invalid request"),
        "model_not_found": (400, "", "Unknown model"),
        "not_found": (404, "", "Not found"),
        "before": (429, "", "Rate limit exceeded, retry later"),
        "midstream": (502, "", "the upstream provider returned an error"),
        "stall": (504, "", "the upstream stream timed out (idle)"),
    }

    def new_ids(self, *, text_completion: bool) -> Ids:
        generation = "gen-" + rand_id(ALNUM, 20)
        return Ids(generation, generation)

    def stream_headers(self, ids: Ids, model: str, estimate: float | int) -> Headers:
        return [
            *super().stream_headers(ids, model, estimate),
            ("x-generation-id", ids.generation_id),
        ]

    def json_headers(self, ids: Ids, model: str, cost: float | int) -> Headers:
        return [("content-type", "application/json"), ("x-generation-id", ids.generation_id)]

    def envelope(
        self, ids: Ids, model: str, created: int, *, first: bool, obj: str
    ) -> dict[str, Any]:
        chunk: dict[str, Any] = {"id": ids.generation_id, "object": obj}
        if first:
            chunk["model"] = model
        return chunk

    def choice(self, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        if "role" in delta:  # the documented first chunk carries no finish_reason
            return {"index": 0, "delta": delta}
        return {"index": 0, "delta": delta, "finish_reason": finish_reason}

    def error_body(self, kind: str, ids: Ids, message: str | None = None) -> dict[str, Any]:
        status, _, default = self.errors[kind]
        return {"error": {"code": status, "message": message or default}}

    def inband_error(self, kind: str, ids: Ids, model: str, created: int) -> dict[str, Any]:
        body = self.error_body(kind, ids)
        body["choices"] = [{"index": 0, "delta": {}, "finish_reason": "error"}]
        return body


DIALECTS: dict[str, Dialect] = {d.name: d for d in (Numes(), Osmexo(), Tiny(), Nodul())}
"""Each dialect of the table as the emulator frames it, in the table's order."""
