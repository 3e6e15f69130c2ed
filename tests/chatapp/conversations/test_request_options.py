"""Answer settings as request options: what each dialect's request carries, and the defaults a new
conversation copies."""

from __future__ import annotations

from typing import Any

import pytest

from chatapp.assistants.models import ChatDefaults
from chatapp.conversations.models import Conversation
from chatapp.conversations.request_options import (
    FIELDS,
    RequestOptions,
    defaults_for,
    dialect_of,
    options_for,
    stream_arguments,
    summary,
)
from chatapp.gateways import configs
from chatapp.gateways.models import Gateway

MESSAGES = [{"role": "user", "content": "Why is the sea salty?"}]
EVERYTHING = RequestOptions("Answer in French.", 0.7, 2048, "high")


def test_no_options_send_the_messages_and_nothing_else() -> None:
    for options in (None, RequestOptions()):
        assert stream_arguments(options, "numes", MESSAGES) == {
            "messages": MESSAGES,
            "max_tokens": None,
        }


def test_numes_gets_everything_with_the_effort_in_its_reasoning_object() -> None:
    assert stream_arguments(EVERYTHING, "numes", MESSAGES) == {
        "messages": [{"role": "system", "content": "Answer in French."}, *MESSAGES],
        "max_tokens": 2048,
        "temperature": 0.7,
        "reasoning": {"effort": "high"},
    }


@pytest.mark.parametrize("dialect", ["osmexo", "tiny", "nodul", "", None])
def test_the_others_and_an_unknown_gateway_get_no_reasoning_control(dialect: str | None) -> None:
    assert stream_arguments(EVERYTHING, dialect, MESSAGES) == {
        "messages": [{"role": "system", "content": "Answer in French."}, *MESSAGES],
        "max_tokens": 2048,
        "temperature": 0.7,
    }


def test_a_generations_own_budget_overrides_the_conversations() -> None:
    arguments = stream_arguments(EVERYTHING, "osmexo", MESSAGES, max_tokens=4096)
    assert arguments["max_tokens"] == 4096
    assert stream_arguments(None, "osmexo", MESSAGES, max_tokens=4096)["max_tokens"] == 4096


def test_a_temperature_of_zero_and_an_effort_of_none_are_sent() -> None:
    arguments = stream_arguments(
        RequestOptions(temperature=0.0, reasoning_effort="none"), "numes", MESSAGES
    )
    assert arguments["temperature"] == 0.0
    assert arguments["reasoning"] == {"effort": "none"}


def test_the_messages_given_are_not_changed() -> None:
    messages = [dict(message) for message in MESSAGES]
    stream_arguments(EVERYTHING, "numes", messages)
    assert messages == MESSAGES


def test_options_are_frozen() -> None:
    with pytest.raises(AttributeError):
        EVERYTHING.temperature = 1.0  # type: ignore[misc]


def test_the_fields_are_the_models() -> None:
    model_fields = {field.name for field in ChatDefaults._meta.get_fields()}
    assert set(FIELDS) <= model_fields
    assert set(FIELDS) <= {field.name for field in Conversation._meta.get_fields()}


@pytest.mark.parametrize(
    ("options", "dialect", "line"),
    [
        (RequestOptions(), "numes", "Gateway defaults"),
        (EVERYTHING, "numes", "System prompt · temperature 0.7 · max 2,048 tokens · effort high"),
        (RequestOptions(temperature=1.0), "tiny", "temperature 1"),
        (
            RequestOptions(max_tokens=512, reasoning_effort="low"),
            "osmexo",
            "max 512 tokens · effort low (not sent: Osmexo takes none)",
        ),
        (
            RequestOptions(reasoning_effort="medium"),
            "",
            "effort medium (not sent: an unknown gateway takes none)",
        ),
        (RequestOptions(reasoning_effort="medium"), None, "effort medium"),
    ],
)
def test_summary(options: RequestOptions, dialect: str | None, line: str) -> None:
    assert summary(options, dialect, None) == line


@pytest.mark.django_db
def test_a_new_conversation_copies_the_users_defaults_and_then_keeps_its_own(alice: Any) -> None:
    assert defaults_for(alice) == {
        "system_prompt": "",
        "temperature": None,
        "max_tokens": None,
        "reasoning_effort": "",
        "tools": [],
    }
    defaults = ChatDefaults.objects.create(
        user=alice,
        system_prompt="Be brief.",
        temperature=0.2,
        reasoning_effort="low",
        tools=["calculator"],
    )
    conversation = Conversation.objects.create(user=alice, **defaults_for(alice))
    expected = RequestOptions("Be brief.", 0.2, None, "low", ("calculator",))
    assert options_for(conversation) == expected
    defaults.temperature = 1.5
    defaults.save()
    conversation.refresh_from_db()
    assert conversation.temperature == 0.2


@pytest.mark.django_db
def test_defaults_are_per_user(alice: Any, bob: Any) -> None:
    ChatDefaults.objects.create(user=alice, max_tokens=1000)
    assert defaults_for(bob)["max_tokens"] is None
    assert defaults_for(alice)["max_tokens"] == 1000


@pytest.mark.django_db
def test_the_dialect_is_the_gateways_or_its_urls(emulator_url: str, settings: Any) -> None:
    settings.CHAT_KEY_ENV_ALLOWED = ("HOME",)  # a variable always set, as these rows' key
    named = Gateway.objects.create(
        name="Named", base_url=f"{emulator_url}/x/v1", dialect="osmexo", api_key_env="HOME"
    )
    guessed = Gateway.objects.create(
        name="Guessed", base_url=f"{emulator_url}/nodul/api/v1", api_key_env="HOME"
    )
    unknown = Gateway.objects.create(
        name="Unknown", base_url="https://llm.example/v1", api_key_env="HOME"
    )
    configs.forget_configs()
    assert dialect_of(named.pk) == "osmexo"
    assert dialect_of(guessed.pk) == "nodul"
    assert dialect_of(unknown.pk) == ""
    assert dialect_of(None) == ""
