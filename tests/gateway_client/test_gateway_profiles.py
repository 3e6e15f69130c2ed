"""What the table's other gateways send, read as each documents it: LiteLLM's call ID and served
model from its headers, vLLM's whole-body error, Groq's usage under `x_groq`."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway_client import GatewayClient, StatusError
from gateway_client.chunks import parse_chunk
from gateway_client.events import Usage
from tests.gateway_client.test_client import FINISH, USAGE, respond, sse, text

LITELLM_HEADERS = {
    "x-litellm-version": "1.80.0",
    "x-litellm-call-id": "7c1c0d9e-4b43-4a11-9b1f-2c3d4e5f6a7b",
    "x-litellm-model-name": "gpt-4o-mini-2024-07-18",
    "x-request-id": "req-proxy-front",
}


def client(transport: httpx.MockTransport, dialect: str | None = None) -> GatewayClient:
    return GatewayClient(
        "http://127.0.0.1:4000/v1", "sk-test", transport=transport, dialect=dialect
    )


@pytest.mark.parametrize("dialect", [None, "litellm"])
async def test_litellm_names_the_call_and_the_model_behind_the_alias(dialect: str | None) -> None:
    """Detected from its headers (None) or set: the call ID its operators search for, not the
    front proxy's `x-request-id`, and the served model over the chunks' alias."""
    body = sse(text("Hi"), FINISH, USAGE, "[DONE]")
    transport, _ = respond(200, body, "text/event-stream", LITELLM_HEADERS)
    async with (
        client(transport, dialect) as gateway,
        gateway.stream_chat(model="alias", messages=[]) as stream,
    ):
        _ = [event async for event in stream]
        completion = stream.completion
    assert stream.dialect == "litellm"
    assert completion.request_id == LITELLM_HEADERS["x-litellm-call-id"]
    assert completion.model == "gpt-4o-mini-2024-07-18"


async def test_litellm_errors_carry_its_call_id_and_a_string_code_said_once() -> None:
    error = {"error": {"message": "No deployments available", "type": None, "param": None,
                       "code": "503"}}  # fmt: skip
    transport, _ = respond(503, json.dumps(error).encode(), "application/json", LITELLM_HEADERS)
    async with client(transport, "litellm") as gateway:
        with pytest.raises(StatusError) as caught:
            async with gateway.stream_chat(model="m", messages=[]) as stream:
                _ = [event async for event in stream]
    assert caught.value.request_id == LITELLM_HEADERS["x-litellm-call-id"]
    assert "503 503" not in str(caught.value)


async def test_elsewhere_the_request_id_is_x_request_id() -> None:
    body = sse(text("Hi"), FINISH, "[DONE]")
    headers = {"x-request-id": "req-9", "x-litellm-call-id": "not-this-gateway"}
    transport, _ = respond(200, body, "text/event-stream", headers)
    async with (
        client(transport, "vllm") as gateway,
        gateway.stream_chat(model="m", messages=[]) as stream,
    ):
        _ = [event async for event in stream]
    assert stream.completion.request_id == "req-9"


async def test_a_vllm_error_body_is_the_error_object_itself() -> None:
    """vLLM before 0.9 answers `{"object": "error", "message": ..., "code": 400}`, no envelope."""
    body = {"object": "error", "message": "max_tokens must be at least 1, got 0.",
            "type": "BadRequestError", "param": None, "code": 400}  # fmt: skip
    transport, _ = respond(400, json.dumps(body).encode(), "application/json")
    async with client(transport, "vllm") as gateway:
        with pytest.raises(StatusError) as caught:
            async with gateway.stream_chat(model="m", messages=[]) as stream:
                _ = [event async for event in stream]
    assert caught.value.message == "max_tokens must be at least 1, got 0."
    assert (caught.value.status, caught.value.type) == (400, "BadRequestError")


def test_groq_usage_under_x_groq_is_read_when_usage_is_absent() -> None:
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
             "x_groq": {"id": "req_1", "usage": {"prompt_tokens": 304, "completion_tokens": 49,
                                                  "total_tokens": 353}}}  # fmt: skip
    usage = [event for event in parse_chunk(chunk) if isinstance(event, Usage)]
    assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [(304, 49)]


def test_groq_usage_copied_to_usage_is_read_once() -> None:
    counts = {"prompt_tokens": 3, "completion_tokens": 2}
    chunk = {"id": "c", "choices": [], "usage": counts, "x_groq": {"usage": counts}}
    assert len([event for event in parse_chunk(chunk) if isinstance(event, Usage)]) == 1
