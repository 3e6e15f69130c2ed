"""The gateway emulator speaks each gateway's documented wire format, scenario by scenario.

Real HTTP over loopback against the session emulator (`emulator_url`, fast pacing), read with
plain httpx and a byte-level SSE splitter (blank lines end events), so what is checked is what
a client would receive: headers, first chunk, keep-alive comments, usage chunk (or none), error
shapes before and after the stream starts, and whether `[DONE]` ends it.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

BASES = {
    "numes": "/numes/api/v1",
    "osmexo": "/osmexo/v1",
    "tiny": "/tiny/v1",
    "nodul": "/nodul/api/v1",
}
DIALECTS = list(BASES)
AUTH = {"Authorization": "Bearer test-key"}
PROMPT = "Explain Lisbon trams and their funicular history"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
_BLANK_LINE = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_TLS = ssl.create_default_context()  # loopback is plain HTTP; sharing this keeps clients cheap


def http(**options: Any) -> httpx.AsyncClient:
    """A fresh client for the emulator (cheap to create: the TLS context is shared)."""
    return httpx.AsyncClient(timeout=30, verify=_TLS, **options)


# ---- helpers (also used by the other test_emulator_* modules) -------------------------------


@dataclass
class Event:
    """One SSE event: its comment lines and its joined `data:` payload (None if it has none)."""

    comments: list[str] = field(default_factory=list)
    data: str | None = None

    @property
    def json(self) -> dict[str, Any]:
        assert self.data is not None
        assert self.data != "[DONE]"
        parsed: dict[str, Any] = json.loads(self.data)
        return parsed


def parse_event(block: bytes) -> Event:
    event = Event()
    data: list[str] = []
    for raw in re.split(rb"\r\n|\n|\r", block):
        line = raw.decode("utf-8")
        if line.startswith(":"):
            event.comments.append(line[1:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    event.data = "\n".join(data) if data else None
    return event


def split_events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete event blocks in `buffer`, and the incomplete rest."""
    blocks: list[bytes] = []
    while match := _BLANK_LINE.search(buffer):
        blocks.append(buffer[: match.start()])
        buffer = buffer[match.end() :]
    return blocks, buffer


async def iter_events(response: httpx.Response) -> AsyncIterator[Event]:
    buffer = b""
    async for chunk in response.aiter_raw():
        blocks, buffer = split_events(buffer + chunk)
        for block in blocks:
            yield parse_event(block)
    assert buffer == b"", f"stream ended mid-event: {buffer!r}"


@dataclass
class Result:
    response: httpx.Response
    events: list[Event]
    error: Exception | None = None

    @property
    def data(self) -> list[str]:
        return [e.data for e in self.events if e.data is not None]

    @property
    def chunks(self) -> list[dict[str, Any]]:
        return [json.loads(d) for d in self.data if d != "[DONE]"]

    @property
    def done(self) -> bool:
        return bool(self.data) and self.data[-1] == "[DONE]"

    @property
    def comments(self) -> list[str]:
        return [c for e in self.events for c in e.comments]

    def field(self, name: str) -> str:
        return "".join(
            c["choices"][0]["delta"].get(name) or ""
            for c in self.chunks
            if c.get("choices") and "delta" in c["choices"][0]
        )

    @property
    def content(self) -> str:
        return self.field("content")

    @property
    def content_chunks(self) -> list[dict[str, Any]]:
        return [
            c for c in self.chunks if c.get("choices") and c["choices"][0]["delta"].get("content")
        ]

    @property
    def finish_reasons(self) -> list[str]:
        """Every `finish_reason` set (Nodul's first chunk has no such key at all)."""
        return [
            c["choices"][0]["finish_reason"]
            for c in self.chunks
            if c.get("choices") and c["choices"][0].get("finish_reason")
        ]


def chat_body(scenario: str, **extra: Any) -> dict[str, Any]:
    messages = extra.pop("messages", [{"role": "user", "content": PROMPT}])
    return {"model": f"emulator/{scenario}", "stream": True, "messages": messages, **extra}


async def stream(
    url: str, dialect: str, body: dict[str, Any], path: str = "chat/completions", **params: Any
) -> Result:
    """POST and read the whole event stream (or error body)."""
    async with http() as client:
        request = client.build_request(
            "POST", f"{url}{BASES[dialect]}/{path}", json=body, headers=AUTH, params=params
        )
        response = await client.send(request, stream=True)
        events: list[Event] = []
        error: Exception | None = None
        try:
            if response.headers.get("content-type") == "text/event-stream":
                async for event in iter_events(response):
                    events.append(event)
            else:
                await response.aread()
        except httpx.RemoteProtocolError as exc:
            error = exc
        finally:
            await response.aclose()
        return Result(response, events, error)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# ---- normal streams ---------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_chat_stream_wire_shape(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("chat"))
    headers, chunks = result.response.headers, result.chunks
    assert result.response.status_code == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-cache"
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1
    chunk_id = ids.pop()

    first = chunks[0]["choices"][0]["delta"]
    assert first["role"] == "assistant"
    if dialect in ("numes", "nodul"):
        assert first["content"], "role arrives with content"
        assert "role" not in chunks[1]["choices"][0]["delta"]
    else:
        assert first == {"role": "assistant", "content": ""}

    match dialect:
        case "numes":
            assert re.fullmatch(r"[0-9a-f-]{36}", chunk_id)
            assert headers["x-generation-id"] == chunk_id
            assert headers["x-request-id"]
        case "osmexo":
            assert chunk_id.startswith("chatcmpl-")
            assert headers["x-request-id"].startswith("req_")
            assert headers["x-llm-model"] == "emulator/chat"
            assert int(headers["x-llm-cost-micro"]) > 0
            assert headers["x-accel-buffering"] == "no"
        case "tiny":
            record = emulator_url.app.records.get(chunk_id)  # type: ignore[attr-defined]
            assert chunk_id == f"chatcmpl-{record.request_id}"
            assert "x-request-id" not in headers
        case "nodul":
            assert chunk_id.startswith("gen-")
            assert headers["x-generation-id"] == chunk_id
            assert result.comments[:1] == ["keepalive"]
            assert chunks[0]["model"] == "emulator/chat"
            assert all("model" not in c and "created" not in c for c in chunks[1:])
    if dialect != "nodul":
        assert all(c["model"] == "emulator/chat" for c in chunks)
        assert not result.comments

    content = result.content
    assert content.startswith("## About")
    for needle in ("Lisbon", "trams", "\n- **", "```python\n", "| --- |", "你好", "🙂"):
        assert needle in content
    assert len(chunks) > 50, "one chunk per token"

    assert result.done
    if dialect == "tiny":
        finish = chunks[-1]
        assert all("usage" not in c for c in chunks)
    else:
        finish, usage_chunk = chunks[-2], chunks[-1]
        assert usage_chunk["choices"] == []
        usage = usage_chunk["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert usage["completion_tokens"] == len(chunks) - (3 if dialect == "osmexo" else 2)
        if dialect == "osmexo":
            assert isinstance(usage["x_llm_cost_micro"], int)
            assert usage["x_llm_usage_estimated"] is False
            assert "cost" not in usage
        else:
            assert isinstance(usage["cost"], float)
            assert usage["cost"] > 0
    assert finish["choices"] == [
        {"index": 0, "delta": {}, "finish_reason": "stop"}
        if dialect != "tiny"
        else {"index": 0, "finish_reason": "stop", "delta": {}}
    ]


async def test_frames_are_data_lines_with_blank_line(emulator_url: str) -> None:
    async with (
        http() as client,
        client.stream(
            "POST",
            f"{emulator_url}/osmexo/v1/chat/completions",
            json=chat_body("echo"),
            headers=AUTH,
        ) as response,
    ):
        raw = await response.aread()
    assert raw.endswith(b"data: [DONE]\n\n")
    for block in raw.split(b"\n\n")[:-1]:
        assert block.startswith(b"data: {") or block == b"data: [DONE]"
        assert b"\n" not in block
        assert b"\r" not in block


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_reasoning_fields(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("reasoning"))
    deltas = [c["choices"][0]["delta"] for c in result.chunks if c["choices"]]
    field_name = {"numes": "reasoning", "osmexo": "reasoning_content", "nodul": "reasoning"}
    assert result.content.startswith("## About")
    if dialect == "tiny":
        assert not any(k in d for d in deltas for k in ("reasoning", "reasoning_content"))
        return
    name = field_name[dialect]
    reasoning = result.field(name)
    assert reasoning.startswith("The user asks about Lisbon")
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    last_reasoning = max(i for i, d in enumerate(deltas) if d.get(name))
    assert last_reasoning < first_content, "reasoning first, then the answer"
    usage = result.chunks[-1]["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    if dialect == "numes":
        texts = [d for d in deltas if "reasoning" in d]
        for delta in texts:
            assert delta["reasoning_details"] == [
                {"type": "reasoning.text", "text": delta["reasoning"]}
            ]
        signed = [d for d in deltas if "reasoning_details" in d and "reasoning" not in d]
        assert len(signed) == 1
        entries = signed[0]["reasoning_details"]
        assert entries[0]["type"] == "reasoning.text"
        assert "text" not in entries[0]
        assert entries[0]["signature"]
        assert entries[0]["format"]
        assert entries[1]["type"] == "reasoning.encrypted"
        assert entries[1]["data"]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_tool_call_then_tool_result(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("tools", tools=[WEATHER_TOOL]))
    calls = [
        call
        for c in result.chunks
        if c["choices"]
        for call in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    opener, fragments = calls[0], calls[1:]
    assert opener["id"].startswith("call_")
    assert opener["type"] == "function"
    assert opener["function"]["name"] == "get_weather"
    assert len(fragments) >= 3
    assert all("id" not in f and "name" not in f["function"] for f in fragments)
    arguments = json.loads("".join(f["function"]["arguments"] for f in fragments))
    assert arguments == {"city": "Lisbon", "days": 3, "unit": "celsius"}
    assert result.finish_reasons == ["tool_calls"]
    assert result.content == ""

    messages = [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": None, "tool_calls": [opener]},
        {"role": "tool", "tool_call_id": opener["id"], "content": "Sunny, 24 °C"},
    ]
    answer = await stream(emulator_url, dialect, chat_body("tools", messages=messages))
    assert "Sunny, 24 °C" in answer.content
    assert answer.done


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_tools_without_request_tools_calls_the_demo_weather_tool(
    emulator_url: str, dialect: str
) -> None:
    body = chat_body("tools", messages=[{"role": "user", "content": "Weather in Oslo today?"}])
    result = await stream(emulator_url, dialect, body)
    calls = [
        call
        for c in result.chunks
        if c["choices"]
        for call in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert calls[0]["function"]["name"] == "get_weather"
    assert len(calls) > 2, "the arguments stream in fragments"
    arguments = json.loads("".join(c["function"].get("arguments", "") for c in calls))
    assert arguments == {"city": "Oslo", "unit": "celsius"}
    assert result.finish_reasons == ["tool_calls"]
    assert result.content == ""
    assert result.done


@pytest.mark.parametrize("dialect", ["numes", "osmexo", "nodul"])
async def test_citations(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("citations"))
    annotations = [
        a
        for c in result.chunks
        if c["choices"]
        for a in c["choices"][0]["delta"].get("annotations", [])
    ]
    assert len(annotations) == 2
    for annotation in annotations:
        assert annotation["type"] == "url_citation"
        cite = annotation["url_citation"]
        assert cite["url"].startswith("https://")
        assert cite["title"]
        cited = result.content[cite["start_index"] : cite["end_index"]]
        assert cited
        assert cite["title"].endswith(cited)


@pytest.mark.parametrize("dialect", ["numes", "osmexo", "nodul"])
async def test_image_output(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("image"))
    images = [
        i for c in result.chunks if c["choices"] for i in c["choices"][0]["delta"].get("images", [])
    ]
    assert len(images) == 1
    assert images[0]["index"] == 0
    assert images[0]["type"] == "image_url"
    url = images[0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert png_size(base64.b64decode(url.split(",", 1)[1])) == (32, 32)
    assert "Lisbon" in result.content


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_length_runs_out_in_reasoning(emulator_url: str, dialect: str) -> None:
    result = await stream(emulator_url, dialect, chat_body("length", max_tokens=20))
    assert result.finish_reasons == ["length"]
    assert result.done
    if dialect == "tiny":  # no reasoning: the answer itself is cut at the budget
        assert result.content.startswith("Let me think")
        return
    field_name = "reasoning_content" if dialect == "osmexo" else "reasoning"
    assert result.field(field_name).startswith("Let me think about Lisbon")
    assert result.content == ""
    assert result.chunks[-1]["usage"]["completion_tokens"] == 20


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_length_with_a_budget_for_the_whole_script_thinks_then_answers(
    emulator_url: str, dialect: str
) -> None:
    result = await stream(emulator_url, dialect, chat_body("length", max_tokens=4096))
    assert result.finish_reasons == ["stop"]
    assert result.done
    assert "## About “Explain Lisbon trams" in result.content
    if dialect == "tiny":  # no reasoning: it thinks aloud before the answer
        assert result.content.startswith("Let me think about Lisbon")
        return
    field_name = "reasoning_content" if dialect == "osmexo" else "reasoning"
    thinking = result.field(field_name)
    assert thinking.startswith("Let me think about Lisbon")
    assert thinking not in result.content
    content_at = next(
        i for i, c in enumerate(result.chunks) if c["choices"][0]["delta"].get("content")
    )
    assert all(
        not c["choices"][0]["delta"].get(field_name)
        for c in result.chunks[content_at:]
        if c["choices"]
    )
    usage = result.chunks[-1]["usage"]
    assert 48 < usage["completion_tokens"] < 4096
    assert usage["completion_tokens_details"]["reasoning_tokens"] < usage["completion_tokens"]


async def test_long_streams_chunk_by_chunk(emulator_url: str) -> None:
    result = await stream(emulator_url, "numes", chat_body("long"), tokens_per_second=20000)
    assert result.done
    assert len(result.chunks) > 2500
    assert result.content.count("## Part") > 10


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_echo_is_verbatim(emulator_url: str, dialect: str) -> None:
    text = "Olá — 你好 — 🙂 <b>&amp;</b>\u0007 line\nbreak\r\n**bold** `code`"
    result = await stream(
        emulator_url, dialect, chat_body("echo", messages=[{"role": "user", "content": text}])
    )
    assert result.content == text


async def test_multipart_user_content_and_unknown_model_name(emulator_url: str) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Describe Porto bridges"}]}]
    body = {"model": "vendor/some-model", "stream": True, "messages": messages}
    result = await stream(emulator_url, "osmexo", body)
    assert "Porto" in result.content
    assert {c["model"] for c in result.chunks} == {"vendor/some-model"}
    assert result.response.headers["x-llm-model"] == "vendor/some-model"


@pytest.mark.parametrize("dialect", ["osmexo", "tiny"])
async def test_text_completions_stream(emulator_url: str, dialect: str) -> None:
    body = {"model": "emulator/echo", "prompt": "Once upon a time", "stream": True}
    result = await stream(emulator_url, dialect, body, path="completions")
    chunks = result.chunks
    assert all(c["object"] == "text_completion" for c in chunks)
    assert all(c["id"].startswith("cmpl-") for c in chunks)
    texts = [c["choices"][0] for c in chunks if c["choices"]]
    assert all("delta" not in t for t in texts)
    assert "".join(t["text"] for t in texts) == "Once upon a time"
    assert texts[0]["text"], "no role chunk"
    assert texts[-1]["finish_reason"] == "stop"
    assert texts[-1]["text"] == ""
    assert result.done
    assert any("usage" in c for c in chunks) is (dialect == "osmexo")
