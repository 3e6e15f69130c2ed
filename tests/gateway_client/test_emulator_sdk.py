"""The official `openai` SDK reads every dialect the emulator speaks: content, tool calls, usage
(none on tiny-3b), in-band errors (raised as `APIError`) and pre-stream errors (status errors)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest
from openai import AsyncOpenAI

from tests.gateway_client.test_emulator import BASES, DIALECTS, PROMPT, WEATHER_TOOL

MESSAGES = [{"role": "user", "content": PROMPT}]


@pytest.fixture
async def sdk(emulator_url: str, request: pytest.FixtureRequest) -> AsyncIterator[AsyncOpenAI]:
    dialect = request.node.callspec.params["dialect"]
    client = AsyncOpenAI(base_url=f"{emulator_url}{BASES[dialect]}", api_key="k", max_retries=0)
    yield client
    await client.close()


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_sdk_reads_content_and_usage(sdk: AsyncOpenAI, dialect: str) -> None:
    stream = await sdk.chat.completions.create(
        model="emulator/chat",
        messages=MESSAGES,
        stream=True,  # type: ignore[arg-type]
    )
    text, usage = [], None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
    assert "".join(text).startswith("## About")
    if dialect == "tiny":
        assert usage is None
        return
    assert usage is not None
    assert usage.completion_tokens > 50
    extra = usage.model_extra or {}
    cost = extra["x_llm_cost_micro"] if dialect == "osmexo" else extra["cost"]
    assert cost > 0


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_sdk_reads_tool_calls(sdk: AsyncOpenAI, dialect: str) -> None:
    stream = await sdk.chat.completions.create(
        model="emulator/tools",
        messages=MESSAGES,  # type: ignore[arg-type]
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        stream=True,
    )
    name, arguments, finish = None, "", None
    async for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        for call in choice.delta.tool_calls or []:
            name = call.function.name if call.function and call.function.name else name
            arguments += (call.function.arguments or "") if call.function else ""
        finish = choice.finish_reason or finish
    assert name == "get_weather"
    assert arguments == '{"city":"Lisbon","days":3,"unit":"celsius"}'
    assert finish == "tool_calls"


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_sdk_errors(sdk: AsyncOpenAI, dialect: str) -> None:
    stream = await sdk.chat.completions.create(
        model="emulator/error-midstream",
        messages=MESSAGES,
        stream=True,  # type: ignore[arg-type]
    )
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk.chat.completions.create(model="emulator/error-before", messages=MESSAGES)  # type: ignore[arg-type]
    assert caught.value.status_code in (402, 429, 503)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_sdk_non_stream(sdk: AsyncOpenAI, dialect: str) -> None:
    completion = await sdk.chat.completions.create(model="emulator/echo", messages=MESSAGES)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == PROMPT
    assert completion.usage is not None


@pytest.mark.parametrize("dialect", ["osmexo", "tiny"])
async def test_sdk_text_completions(sdk: AsyncOpenAI, dialect: str) -> None:
    stream = await sdk.completions.create(model="emulator/echo", prompt="Once upon", stream=True)
    text = "".join([c.choices[0].text async for c in stream if c.choices])
    assert text == "Once upon"
