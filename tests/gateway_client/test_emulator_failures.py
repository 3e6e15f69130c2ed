"""The emulator fails the way each gateway documents: before the stream (status + JSON envelope),
in-band mid-stream (with or without `[DONE]`), by stalling, by dropping the connection, by a slow
start with (or without) keep-alive comments; and it rejects bad requests in the dialect's shape.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from tests.gateway_client.test_emulator import (
    AUTH,
    BASES,
    DIALECTS,
    PROMPT,
    Result,
    chat_body,
    http,
    stream,
)


def assert_envelope(
    dialect: str, body: dict[str, Any], status: int, code: str | None = None
) -> None:
    """The pre-stream error envelope of `dialect`."""
    error = body["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    match dialect:
        case "numes":
            assert error["code"] == status
            assert isinstance(error["metadata"]["error_type"], str)
        case "osmexo":
            assert set(error) == {"type", "code", "message", "request_id"}
            assert isinstance(error["code"], str)
        case "tiny":
            assert set(error) == {"type", "code", "message"}
            assert isinstance(error["code"], str)
        case "nodul":
            assert set(error) == {"code", "message"}
            assert error["code"] == status
    if code is not None:
        assert (error.get("metadata", {}).get("error_type") or error["code"]) == code


BEFORE = {
    "numes": (402, "insufficient_credits"),
    "osmexo": (503, "provider_unavailable"),
    "tiny": (503, "no_capacity"),
    "nodul": (429, None),
}


@pytest.mark.parametrize("stream_flag", [True, False])
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_error_before_stream(emulator_url: str, dialect: str, stream_flag: bool) -> None:
    result = await stream(emulator_url, dialect, chat_body("error-before", stream=stream_flag))
    response = result.response
    status, code = BEFORE[dialect]
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert_envelope(dialect, response.json(), status, code)
    assert ("retry-after" in response.headers) is (status in (429, 503))
    if dialect == "osmexo":
        assert response.json()["error"]["request_id"] == response.headers["x-request-id"]
    if dialect == "tiny":
        assert response.json()["error"]["type"] == "server_error"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_error_midstream(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("error-midstream"))
    assert result.response.status_code == 200
    assert result.content, "some tokens first"
    assert result.done is (dialect in ("numes", "osmexo"))
    last = result.chunks[-1]
    error = last["error"]
    assert all("error" not in c for c in result.chunks[:-1])
    assert all("usage" not in c for c in result.chunks)
    match dialect:
        case "numes":
            assert error == {
                "code": 503,
                "message": "provider became unavailable",
                "metadata": {"error_type": "provider_unavailable"},
            }
            assert last["id"] == result.response.headers["x-generation-id"]
            assert last["choices"] == [
                {"index": 0, "delta": {"content": ""}, "finish_reason": "error"}
            ]
        case "osmexo":
            assert set(last) == {"error"}
            assert error["type"] == "provider_error"
            assert error["code"] == "stream_interrupted"
            assert error["request_id"] == result.response.headers["x-request-id"]
        case "tiny":
            assert set(last) == {"error"}
            assert error["type"] == "server_error"
            assert error["code"] == "upstream_failed"
        case "nodul":
            assert isinstance(error["code"], int)
            assert error["message"]
            assert last["choices"] == [{"index": 0, "delta": {}, "finish_reason": "error"}]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_drop_closes_without_done(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("drop"))
    assert isinstance(result.error, httpx.RemoteProtocolError)
    assert result.content
    assert not result.done
    assert all("error" not in c and "usage" not in c for c in result.chunks)
    generation_id = result.chunks[0]["id"]
    records = emulator_url.app.records  # type: ignore[attr-defined]
    record = await asyncio.to_thread(records.wait_finished, generation_id)
    assert record.final_outcome == "error"
    assert record.tokens_completion > 0


async def test_tiny_stall_becomes_upstream_stall_after_two_seconds(emulator_url: str) -> None:
    started = time.monotonic()
    result = await stream(emulator_url, "tiny", chat_body("stall"))
    assert time.monotonic() - started >= 2.0, "the stall limit, waited out"
    assert result.content
    assert not result.done
    assert result.chunks[-1] == {
        "error": {
            "type": "server_error",
            "code": "upstream_stall",
            "message": "Upstream token stream stalled.",
        }
    }


@pytest.mark.parametrize(
    ("dialect", "error_code", "done"),
    [("numes", 408, True), ("osmexo", "stream_interrupted", True), ("nodul", 504, False)],
)
async def test_stall_is_silent_then_bounded(
    emulator_url: str, dialect: str, error_code: int | str, done: bool
) -> None:
    started = time.monotonic()
    result = await stream(emulator_url, dialect, chat_body("stall"), stall_limit_s=0.4)
    assert time.monotonic() - started >= 0.4
    first_data = next(i for i, e in enumerate(result.events) if e.data)
    assert not [c for e in result.events[first_data:] for c in e.comments], "silence"
    assert result.content
    assert result.chunks[-1]["error"]["code"] == error_code
    assert result.done is done


async def test_stall_limit_defaults_are_documented(emulator_url: str) -> None:
    from gateway_client.emulator import Options
    from gateway_client.emulator.dialects import DIALECTS as ALL

    assert Options().stall_limit_s is None
    assert {name: d.stall_limit_s for name, d in ALL.items()} == {
        "numes": 600.0,
        "osmexo": 60.0,
        "tiny": 2.0,
        "nodul": 120.0,
    }


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_slow_start_keepalives(emulator_url: str, dialect: str) -> None:
    params = {"slow_start_s": 0.45, "slow_start_keepalive_s": 0.1}
    started = time.time()
    async with http() as client:
        url = f"{emulator_url}{BASES[dialect]}/chat/completions"
        async with client.stream(
            "POST", url, json=chat_body("slow-start"), headers=AUTH, params=params
        ) as response:
            headers_at = time.time()
            raw = await response.aread()
    result = Result(response, [])
    from tests.gateway_client.test_emulator import parse_event, split_events

    blocks, rest = split_events(raw)
    result.events = [parse_event(b) for b in blocks]
    assert rest == b""
    assert result.done
    first_data = next(i for i, e in enumerate(result.events) if e.data)
    before = [c for e in result.events[:first_data] for c in e.comments]
    match dialect:
        case "osmexo":
            assert before.count("ping") >= 2
        case "nodul":
            assert before.count("keepalive") >= 3  # one on open, then every 0.1 s
        case "numes":
            assert before == []
            assert headers_at - started >= 0.45, (
                "Numes sends nothing, not even headers, before output"
            )
        case "tiny":
            assert before == []
            records = emulator_url.app.records  # type: ignore[attr-defined]
            record = await asyncio.to_thread(records.wait_finished, result.chunks[0]["id"])
            assert record.first_token_at is not None
            assert headers_at < record.first_token_at, "tiny-3b commits to 200 before any token"
    assert not result.comments[len(before) :], "no keep-alives once tokens flow"


async def test_tiny_slow_start_past_its_stall_limit_fails_empty(emulator_url: str) -> None:
    params = {"slow_start_s": 5, "tiny_stall_s": 0.3}
    started = time.monotonic()
    result = await stream(emulator_url, "tiny", chat_body("slow-start"), **params)
    assert time.monotonic() - started >= 0.6
    assert result.content == "", "failed at the stall limit, before the slow start's first token"
    assert not result.done
    assert result.chunks[-1]["error"]["code"] == "upstream_stall"
    records = emulator_url.app.records  # type: ignore[attr-defined]
    record = await asyncio.to_thread(records.wait_finished, result.chunks[0]["id"])
    assert record.final_outcome == "error"
    assert record.total_cost == 0


# ---- non-streamed responses -----------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_non_stream_completion(emulator_url: str, dialect: str) -> None:
    async with http() as client:
        body = chat_body("reasoning", stream=False)
        response = await client.post(
            f"{emulator_url}{BASES[dialect]}/chat/completions", json=body, headers=AUTH
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    assert data["object"] == "chat.completion"
    choice = data["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "stop"
    assert message["role"] == "assistant"
    assert message["content"].startswith("## About")
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    match dialect:
        case "numes":
            assert message["reasoning"].startswith("The user asks")
            details = message["reasoning_details"]
            assert details[0] == {"type": "reasoning.text", "text": message["reasoning"]}
            assert "signature" in details[1]
            assert isinstance(usage["cost"], float)
            assert response.headers["x-generation-id"] == data["id"]
        case "osmexo":
            assert message["reasoning_content"].startswith("The user asks")
            assert int(response.headers["x-llm-cost-micro"]) == usage["x_llm_cost_micro"]
        case "tiny":
            assert "reasoning" not in message
            assert "cost" not in usage
        case "nodul":
            assert message["reasoning"].startswith("The user asks")
            assert response.headers["x-generation-id"] == data["id"]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_non_stream_tool_call(emulator_url: str, dialect: str) -> None:
    from tests.gateway_client.test_emulator import WEATHER_TOOL

    body = chat_body("tools", stream=False, tools=[WEATHER_TOOL])
    async with http() as client:
        response = await client.post(
            f"{emulator_url}{BASES[dialect]}/chat/completions", json=body, headers=AUTH
        )
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert '"city":"Lisbon"' in call["function"]["arguments"]
    assert choice["message"]["content"] is None


@pytest.mark.parametrize("dialect", ["osmexo", "tiny"])
async def test_non_stream_text_completion(emulator_url: str, dialect: str) -> None:
    body = {"model": "emulator/echo", "prompt": "Once upon a time"}
    async with http() as client:
        response = await client.post(
            f"{emulator_url}{BASES[dialect]}/completions", json=body, headers=AUTH
        )
    data = response.json()
    assert data["object"] == "text_completion"
    assert data["choices"][0]["text"] == "Once upon a time"


# ---- rejected requests ------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("authorization", [None, "Bearer", "Basic abc", "test-key"])
async def test_auth_required(emulator_url: str, dialect: str, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    async with http() as client:
        for method, path in (("POST", "chat/completions"), ("GET", "models")):
            response = await client.request(
                method,
                f"{emulator_url}{BASES[dialect]}/{path}",
                json=chat_body("chat"),
                headers=headers,
            )
            assert response.status_code == 401
            assert response.headers["content-type"] == "application/json"
            assert_envelope(dialect, response.json(), 401)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_bad_requests(emulator_url: str, dialect: str) -> None:
    url = f"{emulator_url}{BASES[dialect]}/chat/completions"
    async with http(headers=AUTH) as client:
        for content in (b"{not json", b"[]", b'{"model": "emulator/chat"}', b'{"messages": []}'):
            response = await client.post(url, content=content)
            assert response.status_code == 400, content
            assert_envelope(dialect, response.json(), 400)
        response = await client.post(
            url,
            json={"model": "emulator/nonsense", "messages": [{"role": "user", "content": PROMPT}]},
        )
        assert response.status_code in (400, 404)
        assert_envelope(dialect, response.json(), response.status_code)
        response = await client.get(url)
        assert response.status_code == 405
        response = await client.post(f"{emulator_url}{BASES[dialect]}/nowhere", json={})
        assert response.status_code == 404
        assert_envelope(dialect, response.json(), 404)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_models_list(emulator_url: str, dialect: str) -> None:
    from gateway_client.emulator import EMBEDDING_MODEL, SCENARIOS

    async with http() as client:
        response = await client.get(f"{emulator_url}{BASES[dialect]}/models", headers=AUTH)
    data = response.json()
    assert data["object"] == "list"
    # Every scenario, then the embedding model (listed, never offered for chat).
    expected = [f"emulator/{s}" for s in SCENARIOS] + [EMBEDDING_MODEL]
    assert [m["id"] for m in data["data"]] == expected
    chat = data["data"][0]
    assert chat["object"] == "model"
    assert chat["name"] == "Emulator: chat"
    assert {
        "chat",
        "reasoning",
        "tools",
        "citations",
        "image",
        "error-before",
        "error-midstream",
        "stall",
        "drop",
        "slow-start",
        "length",
        "long",
        "echo",
    } <= set(SCENARIOS)
