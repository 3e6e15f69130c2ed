"""The model picker (`chatapp.gateways.catalog`): chat models only (and the image models a gateway
serves), the gateway's names, a section per provider, the turn check agreeing with it, and the
page that shows it."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations.models import Conversation
from chatapp.gateways import catalog, configs, key_vault
from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.models import Gateway
from gateway_client import ModelInfo
from gateway_client.model_list import parse_model_info, parse_models, with_details

pytestmark = [pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gateways"


def listed(name: str) -> list[ModelInfo]:
    return parse_models((FIXTURES / name / "models.json").read_bytes())


def litellm_listed() -> list[ModelInfo]:
    details = parse_model_info((FIXTURES / "litellm" / "model_info.json").read_bytes())
    return with_details(listed("litellm"), details)


def config(dialect: str | None, name: str = "GW", pk: int = 7) -> GatewayConfig:
    return GatewayConfig(pk, name, "https://gw.example/v1", "k", dialect, "usd", False)


def shown(sections: list[catalog.ModelSection]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(s.label, [(c.model, c.label) for c in s.choices]) for s in sections]


def test_litellm_routes_are_grouped_by_their_provider_and_non_chat_ones_left_out() -> None:
    assert shown(catalog.sections_for(config("litellm", "LiteLLM"), litellm_listed())) == [
        ("LiteLLM · anthropic", [("claude-sonnet", "claude-sonnet")]),
        ("LiteLLM · openai", [("gpt-4o", "gpt-4o"), ("local-llama", "local-llama")]),
    ]  # not text-embedding-3-small (mode: embedding) nor dall-e-3 (an image model)


def test_ids_with_a_provider_prefix_are_grouped_by_it_and_shown_without_it() -> None:
    assert shown(catalog.sections_for(config("vllm", "vLLM"), listed("vllm"))) == [
        ("vLLM", [("sql-lora", "sql-lora")]),
        ("vLLM · meta-llama", [("meta-llama/Llama-2-7b-hf", "Llama-2-7b-hf")]),
    ]
    [choice] = catalog.sections_for(config("vllm"), listed("vllm"))[1].choices
    assert choice.hint == "meta-llama/Llama-2-7b-hf"  # the whole id, on hover


def test_one_provider_is_one_section_with_the_gateways_names() -> None:
    sections = catalog.sections_for(config("openrouter", "OpenRouter"), listed("openrouter"))
    assert shown(sections) == [("OpenRouter", [("openai/gpt-4", "GPT-4")])]
    assert sections[0].choices[0].hint.startswith("GPT-4 is a large multimodal model")
    assert shown(catalog.sections_for(config("ollama", "Ollama"), listed("ollama"))) == [
        ("Ollama", [("test-model", "test-model")])
    ]


def test_names_are_kept_and_sorted_within_each_providers_section() -> None:
    models = [
        ModelInfo("openai/gpt-4o", "OpenAI: GPT-4o", output_modalities=("text",)),
        ModelInfo("openai/text-embedding-3-large", output_modalities=("embeddings",)),
        ModelInfo("anthropic/claude-sonnet-4.5", "Anthropic: Claude Sonnet 4.5"),
        ModelInfo("openai/gpt-4o-mini", "OpenAI: GPT-4o-mini"),
        ModelInfo("google/gemini-2.5-flash-image", output_modalities=("image",)),
        ModelInfo("google/gemini-2.5-flash-image-preview", output_modalities=("image", "text")),
    ]
    assert shown(catalog.sections_for(config("openrouter", "OR"), models)) == [
        ("OR · anthropic", [("anthropic/claude-sonnet-4.5", "Anthropic: Claude Sonnet 4.5")]),
        (
            "OR · google",
            [("google/gemini-2.5-flash-image-preview", "gemini-2.5-flash-image-preview")],
        ),
        (
            "OR · openai",
            [("openai/gpt-4o", "OpenAI: GPT-4o"), ("openai/gpt-4o-mini", "OpenAI: GPT-4o-mini")],
        ),
    ]


def test_an_image_model_stays_where_the_gateway_serves_images() -> None:
    models = [
        ModelInfo("emulator/chat", "Emulator: chat", output_modalities=("text",)),
        ModelInfo("emulator/image", "Emulator: image", output_modalities=("image",)),
    ]
    chats, images = catalog.sections_for(config("numes", "Numes"), models)
    assert [(c.model, c.generates_images) for c in chats.choices] == [("emulator/chat", False)]
    assert images.label == "Numes · images"
    assert [(c.model, c.generates_images) for c in images.choices] == [("emulator/image", True)]
    [other] = catalog.sections_for(config("openrouter"), models)
    assert [c.model for c in other.choices] == ["emulator/chat"]


def test_a_model_listed_for_titles_or_speech_only_is_no_chat_choice() -> None:
    models = [
        ModelInfo("emulator/audio", output_modalities=("text", "audio")),  # answers with audio
        ModelInfo("emulator/chat", output_modalities=("text",)),
        ModelInfo("emulator/title", output_modalities=("text",), purpose="title"),
        ModelInfo("openai/gpt-4o-mini-tts", output_modalities=("audio",)),
    ]
    assert shown(catalog.sections_for(config("numes", "Numes"), models)) == [
        ("Numes", [("emulator/audio", "emulator/audio"), ("emulator/chat", "emulator/chat")]),
    ]
    # The model a conversation uses is offered there all the same: the page can select it.
    in_use = catalog.sections_for(config("numes", "Numes"), models, in_use="emulator/title")
    assert ("emulator/title", "emulator/title") in shown(in_use)[0][1]
    speech = catalog.sections_for(config("numes"), models, in_use="openai/gpt-4o-mini-tts")
    assert "openai/gpt-4o-mini-tts" not in [c.model for s in speech for c in s.choices]


def picker(html: str) -> dict[str, list[str]]:
    """The page's model picker: each section's label and the models its options post."""
    start = html.index('<select id="model"')
    options = html[start : html.index("</select>", start)]
    return {
        label: re.findall(r'<option value="g\d+:([^"]*)"', body)
        for label, body in re.findall(r'<optgroup label="([^"]*)">(.*?)</optgroup>', options, re.S)
    }


async def test_the_emulators_picker_offers_chat_models_and_image_models_apart(alice: Any) -> None:
    client = AsyncClient()
    await client.aforce_login(alice)
    sections = picker((await client.get(reverse("chat:home"))).content.decode())
    assert list(sections) == ["Default gateway", "Default gateway · images"]
    chats = sections["Default gateway"]
    assert "emulator/chat" in chats
    assert "emulator/audio" in chats  # a chat that answers with audio (and Read aloud's model)
    assert "emulator/title" not in chats  # its /models entry says it writes titles
    assert "emulator/image" not in chats
    assert sections["Default gateway · images"] == ["emulator/image"]


async def test_a_conversation_on_a_model_left_out_still_shows_it_selected(alice: Any) -> None:
    conversation = await Conversation.objects.acreate(user=alice, model="emulator/title")
    client = AsyncClient()
    await client.aforce_login(alice)
    response = await client.get(reverse("chat:conversation", args=[conversation.pk]))
    html = response.content.decode()
    assert "emulator/title" in picker(html)["Default gateway"]
    assert re.search(r'<option value="g\d+:emulator/title"[^>]* selected>', html)
    gateway = await configs.aconfig_for(None)
    assert await catalog.listed_models(gateway, "emulator/title")  # and a follow-up goes to it
    # Elsewhere it is left out.
    assert "emulator/title" not in str(
        picker((await client.get(reverse("chat:home"))).content.decode())
    )


async def test_a_turn_may_use_only_what_the_picker_offers() -> None:
    gateway = config("litellm", "LiteLLM")
    catalog._models_cache[gateway] = (time.monotonic(), litellm_listed())
    assert await catalog.listed_models(gateway, "gpt-4o")
    for model, said in (
        ("text-embedding-3-small", "(embedding)"),
        ("dall-e-3", "(by its name)"),
    ):
        with pytest.raises(catalog.ModelUnavailable) as refused:
            await catalog.listed_models(gateway, model)
        assert str(refused.value) == f"LiteLLM lists '{model}', but not as a chat model {said}."
    with pytest.raises(catalog.ModelUnavailable, match="does not offer the model 'gpt-5'"):
        await catalog.listed_models(gateway, "gpt-5")
    numes = config("numes", pk=8)
    catalog._models_cache[numes] = (
        time.monotonic(),
        [ModelInfo("emulator/image", output_modalities=("image",))],
    )
    assert await catalog.listed_models(numes, "emulator/image")


async def test_the_picker_shows_a_group_per_provider(alice: Any) -> None:
    row = await Gateway.objects.acreate(
        name="LiteLLM",
        base_url="https://litellm.example/v1",
        dialect="litellm",
        cost_unit="usd",
        api_key_encrypted=await sync_to_async(key_vault.encrypt)("sk-test"),
    )
    configs.forget_configs()
    catalog._models_cache[await configs.aconfig_for(row.pk)] = (time.monotonic(), litellm_listed())
    client = AsyncClient()
    await client.aforce_login(alice)
    html = (await client.get(reverse("chat:home"))).content.decode()
    start = html.index('<select id="model"')  # the page has other selects (the theme's) before it
    picker = html[start : html.index("</select>", start)]
    groups = re.findall(r'<optgroup label="([^"]*)"', picker)
    assert groups[2:] == ["LiteLLM · anthropic", "LiteLLM · openai"]  # after the default's two
    options = re.findall(
        r'<option value="g(\d+):([^"]*)"[^>]*data-gateway="([^"]*)"[^>]*>([^<]*)</option>', picker
    )
    ours = [(model, gateway, text) for pk, model, gateway, text in options if pk == str(row.pk)]
    # Each option says its model; its gateway, named once by its group, is the line beside the
    # picker's when it is chosen (`data-gateway`).
    assert ours == [
        ("claude-sonnet", "LiteLLM", "claude-sonnet"),
        ("gpt-4o", "LiteLLM", "gpt-4o"),
        ("local-llama", "LiteLLM", "local-llama"),
    ]
