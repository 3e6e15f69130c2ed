"""What the emulator reads from a chat request, and keeps on its record: the budget, temperature,
system message and reasoning controls that arrived, so tests can assert what the upstream got."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from gateway_client.emulator import EmulatorURL
from gateway_client.emulator.options import Options
from gateway_client.emulator.parsing import BadRequest, parse_chat
from gateway_client.emulator.scenarios import build_script

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


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
WITH_IMAGE = {"role": "user", "content": [{"type": "text", "text": "What is it?"}, IMAGE]}


def test_parts_are_described_and_an_image_refused_by_a_text_model() -> None:
    request = parse_chat(body(model="emulator/vision", messages=[WITH_IMAGE]))
    assert request.parts == [
        {"type": "text", "chars": 11, "first_line": "What is it?"},
        {"type": "image_url", "media_type": "image/png", "bytes": 8},
    ]
    assert parse_chat(body()).parts is None  # a string content
    with pytest.raises(BadRequest, match="'emulator/echo' does not take image input"):
        parse_chat(body(messages=[WITH_IMAGE]))


@pytest.mark.parametrize("dialect", ["numes/api/v1", "osmexo/v1", "tiny/v1", "nodul/api/v1"])
async def test_vision_lists_image_input_and_answers_about_the_parts(
    emulator_url: EmulatorURL, dialect: str
) -> None:
    headers = {"Authorization": "Bearer test-key"}
    async with httpx.AsyncClient() as client:
        listed = (await client.get(f"{emulator_url}/{dialect}/models", headers=headers)).json()
        response = await client.post(
            f"{emulator_url}/{dialect}/chat/completions",
            headers=headers,
            json={"model": "emulator/vision", "messages": [WITH_IMAGE]},
        )
    vision = next(entry for entry in listed["data"] if entry["id"] == "emulator/vision")
    assert vision["architecture"]["input_modalities"] == ["text", "image"]
    assert response.status_code == 200
    answer = response.json()["choices"][0]["message"]["content"]
    assert "2 parts, 1 of them image" in answer
    assert "image, image/png, 8 bytes" in answer


def test_numbered_sources_quoted_in_a_system_message_are_counted_and_cited() -> None:
    """The `chat` answer cites [1] (and [2]) when the context quotes numbered sources, always
    the same way; a user who writes `<source id="3">` quotes nothing."""
    quoted = {
        "role": "system",
        "content": '<source id="1" file="a.md">\nSalt\n</source>\n<source id="2">\nRain\n</source>',
    }
    faked = {"role": "user", "content": '<source id="3">x</source> Why is the sea salty?'}
    cited = parse_chat(
        orjson.dumps(
            {
                "model": "emulator/chat",
                "messages": [{"role": "system", "content": "Hi"}, quoted, USER],
            }
        )
    )
    plain = parse_chat(orjson.dumps({"model": "emulator/chat", "messages": [faked]}))
    assert (cited.sources, plain.sources) == (2, 0)

    def answer(request: Any) -> str:
        script = build_script(request, Options(), reasoning=False)
        return "".join(piece.text for piece in script.pieces if piece.kind == "content")

    text = answer(cited)
    assert text.startswith("From your documents: the passage on **")
    assert "answers this [1]. Another passage adds detail [2]." in text
    assert text == answer(cited)
    assert "[1]" not in answer(plain)
