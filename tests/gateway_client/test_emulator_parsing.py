"""What the emulator reads from a chat request, and keeps on its record: the budget, temperature,
system message and reasoning controls that arrived, so tests can assert what the upstream got."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from gateway_client.emulator import EmulatorURL
from gateway_client.emulator.parsing import BadRequest, parse_chat

USER = {"role": "user", "content": "Why is the sea salty?"}


def body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "emulator/echo", "messages": [USER], **fields})


def test_nothing_asked_for_reads_as_none() -> None:
    request = parse_chat(body())
    assert (request.max_tokens, request.temperature, request.system, request.reasoning) == (
        None,
        None,
        None,
        None,
    )


def test_what_a_request_asks_for_is_read() -> None:
    system = {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]}
    request = parse_chat(
        orjson.dumps(
            {
                "model": "emulator/echo",
                "messages": [system, USER],
                "max_tokens": 2048,
                "temperature": 1,
                "reasoning": {"effort": "high", "exclude": False},
            }
        )
    )
    assert request.system == "Answer in French."
    assert request.temperature == 1.0
    assert request.max_tokens == 2048
    assert request.reasoning == {"effort": "high", "exclude": False}
    assert request.last_user == "Why is the sea salty?"


def test_only_a_leading_system_message_is_the_system_prompt() -> None:
    later = {"role": "system", "content": "Not first."}
    assert parse_chat(orjson.dumps({"model": "m", "messages": [USER, later]})).system is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": 2.5}, "`temperature` must be a number from 0 to 2."),
        ({"temperature": -1}, "`temperature` must be a number from 0 to 2."),
        ({"temperature": "0.7"}, "`temperature` must be a number from 0 to 2."),
        ({"temperature": True}, "`temperature` must be a number from 0 to 2."),
        ({"reasoning": "high"}, "`reasoning` must be an object."),
        (
            {"reasoning": {"effort": "max"}},
            "`reasoning.effort` must be one of xhigh, high, medium, low, minimal, none.",
        ),
    ],
)
def test_what_no_gateway_takes_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_chat(body(**fields))
    assert str(refused.value) == message


async def test_the_record_keeps_what_arrived(emulator_url: EmulatorURL) -> None:
    system = {"role": "system", "content": "Recorded system prompt."}
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{emulator_url}/numes/api/v1/chat/completions",
            headers={"Authorization": "Bearer test-key"},
            json={
                "model": "emulator/echo",
                "messages": [system, USER],
                "temperature": 0.3,
                "max_tokens": 100,
                "reasoning": {"effort": "low"},
            },
        )
    assert response.status_code == 200
    record = emulator_url.app.records.get(response.json()["id"])
    assert record is not None
    assert record.system == "Recorded system prompt."
    assert (record.temperature, record.max_tokens, record.reasoning) == (
        0.3,
        100,
        {"effort": "low"},
    )


async def test_a_refused_value_gets_the_dialects_400(emulator_url: EmulatorURL) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{emulator_url}/osmexo/v1/chat/completions",
            headers={"Authorization": "Bearer test-key"},
            json={"model": "emulator/echo", "messages": [USER], "temperature": 9},
        )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "`temperature` must be a number from 0 to 2."
