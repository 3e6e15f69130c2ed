"""The `tools` scenario's knobs, over real HTTP: several calls in a round with their argument
fragments interleaved across indexes (`calls`), arguments that are not JSON (`args=invalid`),
`finish_reason: "stop"` after calls (`finish=stop`), and rounds of calls until the conversation has
enough tool results (`rounds`), each answer quoting the last round's results.

The tools offered are shaped like the app's built-ins (`calculator(expression)`,
`current_time(time_zone)`), whose arguments the emulator fills with values that suit them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.gateway_client.test_emulator import (
    AUTH,
    BASES,
    DIALECTS,
    PROMPT,
    WEATHER_TOOL,
    Result,
    chat_body,
    http,
    stream,
)


def function_tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


CALCULATOR = function_tool("calculator", {"expression": {"type": "string"}})
CLOCK = function_tool("current_time", {"time_zone": {"type": "string"}})


@dataclass
class Call:
    index: int
    id: str
    name: str
    arguments: str


def fragments(result: Result) -> list[dict[str, Any]]:
    """Every `delta.tool_calls` entry, in stream order."""
    return [
        call
        for chunk in result.chunks
        if chunk.get("choices")
        for call in chunk["choices"][0]["delta"].get("tool_calls", [])
    ]


def calls(result: Result) -> list[Call]:
    """The calls as a client accumulates them: by each entry's index, as the docs say."""
    found: dict[int, Call] = {}
    for entry in fragments(result):
        call = found.setdefault(entry["index"], Call(entry["index"], "", "", ""))
        call.id = entry.get("id", call.id)
        call.name = entry["function"].get("name", call.name)
        call.arguments += entry["function"].get("arguments", "")
    return [found[index] for index in sorted(found)]


def tools_model(**knobs: Any) -> str:
    query = "&".join(f"{key}={value}" for key, value in knobs.items())
    return "emulator/tools" + (f"?{query}" if query else "")


def answered(
    messages: list[dict[str, Any]], made: list[Call], results: list[str]
) -> list[dict[str, Any]]:
    """`messages` with the assistant's calls and a tool message per call's result."""
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in made
        ],
    }
    replies = [
        {"role": "tool", "tool_call_id": call.id, "content": result}
        for call, result in zip(made, results, strict=True)
    ]
    return [*messages, assistant, *replies]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_several_calls_in_a_round_interleave_their_fragments(
    emulator_url: str, dialect: str
) -> None:
    body = chat_body("tools", model=tools_model(calls=3), tools=[CALCULATOR, CLOCK])
    result = await stream(emulator_url, dialect, body)
    made = calls(result)
    assert [call.index for call in made] == [0, 1, 2]
    assert [call.name for call in made] == ["calculator", "current_time", "calculator"]
    assert [json.loads(call.arguments) for call in made] == [
        {"expression": "6*7"},
        {"time_zone": "Asia/Tokyo"},
        {"expression": "355/113"},
    ]
    assert len({call.id for call in made}) == 3
    assert all(call.id.startswith("call_") for call in made)
    order = [entry["index"] for entry in fragments(result)]
    last_of_first = max(i for i, index in enumerate(order) if index == 0)
    assert order.index(1) < last_of_first, "call 1 starts before call 0's arguments end"
    assert order.index(2) < last_of_first
    assert result.finish_reasons == ["tool_calls"]
    assert result.content == ""
    assert result.done


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_a_buffered_answer_has_every_call_of_the_round(
    emulator_url: str, dialect: str
) -> None:
    body = {**chat_body("tools", model=tools_model(calls=2), tools=[CLOCK]), "stream": False}
    async with http() as client:
        response = await client.post(
            f"{emulator_url}{BASES[dialect]}/chat/completions", json=body, headers=AUTH
        )
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    arguments = [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]]
    assert arguments == [{"time_zone": "Europe/Lisbon"}, {"time_zone": "Asia/Tokyo"}]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_invalid_arguments_are_cut_short(emulator_url: str, dialect: str) -> None:
    tools = [CALCULATOR, WEATHER_TOOL]
    valid = calls(await stream(emulator_url, dialect, chat_body("tools", tools=tools)))
    body = chat_body("tools", model=tools_model(args="invalid", calls=2), tools=tools)
    invalid = calls(await stream(emulator_url, dialect, body))
    assert [call.name for call in invalid] == ["calculator", "get_weather"]
    for call in invalid:
        with pytest.raises(json.JSONDecodeError):
            json.loads(call.arguments)
    assert valid[0].arguments.startswith(invalid[0].arguments)
    assert len(invalid[0].arguments) < len(valid[0].arguments)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_finish_stop_ends_a_round_of_calls_with_stop(emulator_url: str, dialect: str) -> None:
    body = chat_body("tools", model=tools_model(finish="stop"), tools=[CALCULATOR])
    result = await stream(emulator_url, dialect, body)
    assert [json.loads(call.arguments) for call in calls(result)] == [{"expression": "6*7"}]
    assert result.finish_reasons == ["stop"]


@pytest.mark.parametrize("dialect", ["numes", "nodul"])
async def test_it_calls_again_until_the_rounds_are_done_then_quotes_the_last_results(
    emulator_url: str, dialect: str
) -> None:
    model = tools_model(calls=2, rounds=3)
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    for round_number in range(1, 4):
        result = await stream(
            emulator_url, dialect, chat_body("tools", model=model, messages=messages, tools=[CLOCK])
        )
        made = calls(result)
        assert len(made) == 2, f"round {round_number} calls"
        assert result.finish_reasons == ["tool_calls"]
        results = [f"result {round_number}.{n}: {call.arguments}" for n, call in enumerate(made)]
        messages = answered(messages, made, results)
    answer = await stream(
        emulator_url, dialect, chat_body("tools", model=model, messages=messages, tools=[CLOCK])
    )
    assert calls(answer) == []
    assert answer.finish_reasons == ["stop"]
    for result in results:
        assert f"> {result}" in answer.content
    assert "result 2." not in answer.content, "only the last round is quoted"
    assert answer.done


async def test_rounds_are_counted_after_the_last_user_message(emulator_url: str) -> None:
    first = [{"role": "user", "content": "What is 6*7?"}]
    made = calls(await stream(emulator_url, "numes", chat_body("tools", messages=first)))
    earlier = answered(first, made, ["42"])
    asked_again = [*earlier, {"role": "assistant", "content": "42."}, *first]
    again = await stream(emulator_url, "numes", chat_body("tools", messages=asked_again))
    assert len(calls(again)) == 1, "a new question starts counting again"
    done = await stream(emulator_url, "numes", chat_body("tools", messages=earlier))
    assert done.content == "The tool returned:\n\n> 42\n\nSo, in short: 42"


async def test_a_runaway_model_keeps_calling(emulator_url: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    body = {"model": tools_model(rounds=99), "tools": [CALCULATOR]}
    for _ in range(6):
        result = await stream(emulator_url, "osmexo", chat_body("tools", messages=messages, **body))
        made = calls(result)
        assert len(made) == 1
        assert result.finish_reasons == ["tool_calls"]
        messages = answered(messages, made, ["42"])


async def test_knobs_also_come_from_the_url_query(emulator_url: str) -> None:
    body = chat_body("tools", tools=[CALCULATOR])
    result = await stream(emulator_url, "tiny", body, calls="2", finish="stop")
    assert [call.arguments for call in calls(result)] == [
        '{"expression":"6*7"}',
        '{"expression":"2**10"}',
    ]
    assert result.finish_reasons == ["stop"]


@pytest.mark.parametrize(
    ("knobs", "count"),
    [({"calls": "many"}, 1), ({"calls": "0"}, 1), ({"calls": "1000"}, 16), ({"args": "odd"}, 1)],
)
async def test_malformed_knobs_are_ignored_or_clamped(
    emulator_url: str, knobs: dict[str, str], count: int
) -> None:
    body = chat_body("tools", model=tools_model(**knobs), tools=[CALCULATOR])
    made = calls(await stream(emulator_url, "numes", body))
    assert len(made) == count
    assert all(json.loads(call.arguments)["expression"] for call in made)


async def test_without_request_tools_every_call_is_the_demo_tool(emulator_url: str) -> None:
    body = chat_body(
        "tools",
        model=tools_model(calls=2),
        messages=[{"role": "user", "content": "Weather in Oslo today?"}],
    )
    made = calls(await stream(emulator_url, "numes", body))
    assert [(call.name, json.loads(call.arguments)) for call in made] == [
        ("get_weather", {"city": "Oslo", "unit": "celsius"}),
        ("get_weather", {"city": "Oslo", "unit": "celsius"}),
    ]


async def test_the_tool_the_prompt_names_is_the_one_called(emulator_url: str) -> None:
    """An MCP server's tools come many at a time; a test picks one by naming it."""
    slow = function_tool("docs__slow", {"seconds": {"type": "number", "default": 30}})
    lookup = function_tool("docs__lookup", {"word": {"type": "string"}})
    messages = [{"role": "user", "content": "Please use docs__lookup on Lisbon"}]
    body = chat_body("tools", tools=[CALCULATOR, slow, lookup], messages=messages)
    [call] = calls(await stream(emulator_url, "numes", body))
    assert call.name == "docs__lookup"
    body = chat_body("tools", model=tools_model(calls=2), tools=[CALCULATOR, slow, lookup])
    body["messages"] = [{"role": "user", "content": "docs__slow, then docs__lookup"}]
    made = calls(await stream(emulator_url, "numes", body))
    assert [c.name for c in made] == ["docs__slow", "docs__lookup"]
    assert json.loads(made[0].arguments) == {"seconds": 30}
