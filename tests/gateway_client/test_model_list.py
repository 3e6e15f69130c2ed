"""`GET /models` and LiteLLM's `GET /model/info` read as untrusted input
(`gateway_client.model_list`): typed, entry by entry, depth-bounded, read over a real socket only
up to its cap; and what each gateway's list says of its models, from their own bodies."""

from __future__ import annotations

import gzip
import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from gateway_client import GatewayClient
from gateway_client.errors import GatewayError, ProtocolError
from gateway_client.model_list import (
    MAX_MODELS_BYTES,
    ModelInfo,
    TooLarge,
    parse_model_info,
    parse_models,
    with_details,
)
from tests.gateway_client.rawserver import Peer, raw_server


def test_a_listing_reads_its_ids_names_prices_and_outputs() -> None:
    body = (
        b'{"object": "list", "data": [{"id": "b", "name": "Bee", "description": "d",'
        b' "pricing": {"prompt": "0.000001", "completion": 2e-06},'
        b' "architecture": {"output_modalities": ["IMAGE", "text"]}, "extra": {"x": [1]}},'
        b' {"id": "a"}]}'
    )
    assert parse_models(body) == [
        ModelInfo("b", "Bee", "d", "0.000001", "2e-06", ("image", "text")),
        ModelInfo("a"),
    ]


def test_bad_entries_are_skipped_and_bad_fields_dropped() -> None:
    body = (
        b'{"data": [{"id": 5}, {"id": null}, {"id": ""}, {"id": ["x"]}, 7, "m", null,'
        b' {"id": "kept", "pricing": {"prompt": true}, "architecture": 3, "name": 9}]}'
    )
    assert parse_models(body) == [ModelInfo("kept")]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"[]", 'not {"data": [...]}: Expected `object`, got `array`'),
        (b'{"data": 5}', 'not {"data": [...]}: Expected `array`, got `int`'),
        (b'{"models": []}', 'not {"data": [...]}: Object missing required field `data`'),
        (b"<html>", "not JSON"),
        (b'{"data": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested too deeply"),
        (
            b'{"data": [{"id": "a", "x": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001 + b"]}",
            "nested too deeply",
        ),
    ],
)
def test_anything_else_is_a_protocol_error(body: bytes, said: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_models(body)
    assert said in str(caught.value)


async def test_a_huge_listing_is_read_only_up_to_the_cap() -> None:
    sent: list[int] = []

    async def huge(peer: Peer) -> None:
        await peer.head(content_type="application/json")
        await peer.chunk(b'{"data": [{"id": "a", "pad": "')
        sent.append(0)
        for _ in range(300 * 16):  # 300 MB, a write at a time, until the client hangs up
            await peer.chunk(b"x" * 65536)
            sent[0] += 65536

    async with raw_server(huge) as (url, _), GatewayClient(url, "k") as client:
        with pytest.raises(TooLarge, match="larger than 4 MiB"):
            await client.list_models()
    assert sent[0] < MAX_MODELS_BYTES + 32 * 1024 * 1024  # the cap and the socket's buffers


BOMB = gzip.compress(b"0" * (64 << 20), compresslevel=9)  # 64 MiB in about 64 KiB


@pytest.mark.parametrize("status", ["200 OK", "500 Internal Server Error"])
async def test_a_compressed_listing_is_asked_against_and_never_expanded(status: str) -> None:
    async def bomb(peer: Peer) -> None:
        await peer.head(status, "application/json", extra="Content-Encoding: gzip\r\n")
        await peer.chunk(BOMB)
        await peer.end()

    tracemalloc.start()
    try:
        async with raw_server(bomb) as (url, peers), GatewayClient(url, "k") as client:
            with pytest.raises(GatewayError):
                await client.list_models()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the 64 MiB it would expand to was never made
    assert b"accept-encoding: identity" in peers[0].request_head.lower()


# What each gateway's list says, read from its captured or documented bodies (`SOURCES.md`) ------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gateways"


def fixture(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


def test_litellm_model_info_gives_each_route_its_mode_provider_and_prices() -> None:
    routes = {info.id: info for info in parse_model_info(fixture("litellm/model_info.json"))}
    assert routes == {
        "gpt-4o": ModelInfo(
            "gpt-4o",
            prompt_price="2.5e-06",
            completion_price="1e-05",
            mode="chat",
            provider="openai",
        ),
        "claude-sonnet": ModelInfo(
            "claude-sonnet",
            prompt_price="3e-06",
            completion_price="1.5e-05",
            mode="chat",
            provider="anthropic",
        ),
        "text-embedding-3-small": ModelInfo(
            "text-embedding-3-small",
            prompt_price="2e-08",
            completion_price="0.0",
            mode="embedding",
            provider="openai",
        ),
        "dall-e-3": ModelInfo("dall-e-3", provider="openai"),
        "local-llama": ModelInfo("local-llama", provider="openai"),
    }


def test_litellm_models_with_its_model_info_say_what_is_chat_and_its_prices() -> None:
    listed = parse_models(fixture("litellm/models.json"))
    assert [(info.id, info.mode) for info in listed] == [
        ("gpt-4o", "chat"),
        ("claude-sonnet", "chat"),
        ("text-embedding-3-small", "embedding"),
        ("dall-e-3", None),
        ("local-llama", None),
    ]
    merged = with_details(listed, parse_model_info(fixture("litellm/model_info.json")))
    assert [(info.id, info.chat, info.provider) for info in merged] == [
        ("gpt-4o", True, "openai"),
        ("claude-sonnet", True, "anthropic"),  # its /v1/models entry says `owned_by: openai`
        ("text-embedding-3-small", False, "openai"),
        ("dall-e-3", False, "openai"),  # no mode anywhere: its id names an image model
        ("local-llama", True, "openai"),
    ]
    assert (merged[1].prompt_price, merged[1].completion_price) == ("3e-06", "1.5e-05")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("openrouter/models.json", [("openai/gpt-4", "GPT-4", ("text",), True)]),
        (
            "vllm/models.json",
            [("meta-llama/Llama-2-7b-hf", None, (), True), ("sql-lora", None, (), True)],
        ),
        ("ollama/models.json", [("test-model", None, (), True)]),
        (
            "llamacpp/models.json",
            [("../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", None, ("text",), True)],
        ),
    ],
)
def test_each_gateways_list_reads_as_its_models(
    path: str, expected: list[tuple[str, str | None, tuple[str, ...], bool]]
) -> None:
    found = parse_models(fixture(path))
    assert [(i.id, i.name, i.output_modalities, i.chat) for i in found] == expected


@pytest.mark.parametrize(
    ("info", "chat"),
    [
        (ModelInfo("m", mode="chat"), True),
        (ModelInfo("m", mode="completion"), True),
        (ModelInfo("m", mode="embedding"), False),
        (ModelInfo("m", mode="image_generation"), False),
        (ModelInfo("m", mode="audio_transcription"), False),
        (ModelInfo("m", mode="rerank"), False),
        (ModelInfo("m", mode="moderation"), False),
        (ModelInfo("chat-embed", mode="chat"), True),  # the gateway's word beats the id's
        (ModelInfo("m", output_modalities=("image",)), False),
        (ModelInfo("m", output_modalities=("embeddings",)), False),
        (ModelInfo("m", output_modalities=("decisions",)), False),  # llama.cpp's decision models
        (ModelInfo("m", output_modalities=("image", "text")), True),
        (ModelInfo("text-embedding-3-small", output_modalities=("text",)), True),
        (ModelInfo("nomic-embed-text:latest"), False),
        (ModelInfo("mxbai-embed-large"), False),
        (ModelInfo("BAAI/bge-reranker-v2-m3"), False),
        (ModelInfo("whisper-1"), False),
        (ModelInfo("tts-1-hd"), False),
        (ModelInfo("omni-moderation-latest"), False),
        (ModelInfo("llama3.2:3b"), True),
        (ModelInfo("Qwen/Qwen2.5-7B-Instruct"), True),
        (ModelInfo("openai/gpt-4o"), True),
        (ModelInfo("emulator/chat"), True),
    ],
)
def test_a_model_is_chat_unless_its_gateway_or_its_id_says_otherwise(
    info: ModelInfo, chat: bool
) -> None:
    assert info.chat is chat


def test_model_info_entries_are_read_one_by_one() -> None:
    body = (
        b'{"data": [{"model_name": 5}, {"model_name": ""}, 7, {"model_info": {}},'
        b' {"model_name": "a", "model_info": {"mode": "CHAT", "input_cost_per_token": true,'
        b' "output_cost_per_token": "x", "litellm_provider": 3}},'
        b' {"model_name": "b", "model_info": null},'
        b' {"model_name": "c", "model_info": {"mode": "embedding", "input_cost_per_token": 1,'
        b' "output_cost_per_token": 0, "extra": {"x": [1]}}}]}'
    )
    assert parse_model_info(body) == [
        ModelInfo("b"),
        ModelInfo("c", prompt_price="1", completion_price="0", mode="embedding"),
    ]
    assert parse_model_info(b'{"data": [{"model_name": "a", "model_info": {"mode": "CHAT"}}]}') == [
        ModelInfo("a", mode="chat")
    ]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"[]", 'the model details is not {"data": [...]}'),
        (b"<html>", "the model details is not JSON"),
        (b'{"data": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested too deeply"),
    ],
)
def test_model_info_that_is_not_a_list_is_a_protocol_error(body: bytes, said: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(said)):
        parse_model_info(body)


def test_details_fill_in_what_the_listing_lacks_and_add_no_model() -> None:
    listed = [
        ModelInfo("a", "Listed A", prompt_price="1", completion_price="2"),
        ModelInfo("b"),
        ModelInfo("c"),
    ]
    details = [
        ModelInfo("a", prompt_price="9", completion_price="9", mode="chat", provider="x"),
        ModelInfo("b", provider="y"),  # a deployment without prices, then one with them
        ModelInfo("b", prompt_price="3", completion_price="4", mode="chat"),
        ModelInfo("unlisted", prompt_price="5", completion_price="6", mode="chat"),
    ]
    assert with_details(listed, details) == [
        ModelInfo(
            "a", "Listed A", prompt_price="1", completion_price="2", mode="chat", provider="x"
        ),
        ModelInfo("b", prompt_price="3", completion_price="4", mode="chat", provider="y"),
        ModelInfo("c"),
    ]


# `GatewayClient.list_models` on a LiteLLM: `/v1/models`, then `/model/info` at its root ---------


def litellm_server(info_status: str = "200 OK", info_body: bytes | None = None) -> Any:
    async def script(peer: Peer) -> None:
        path = peer.request_head.split(b" ", 2)[1]
        if path == b"/v1/models":
            await peer.head(content_type="application/json", extra="Connection: close\r\n")
            await peer.chunk(fixture("litellm/models.json"))
        elif path == b"/model/info":
            body = fixture("litellm/model_info.json") if info_body is None else info_body
            await peer.head(info_status, "application/json", extra="Connection: close\r\n")
            await peer.chunk(body)
        else:
            await peer.head("404 Not Found", "application/json", extra="Connection: close\r\n")
            await peer.chunk(b'{"error": "no route"}')
        await peer.end()

    return raw_server(script)


async def test_on_litellm_the_list_has_the_modes_and_prices_of_model_info() -> None:
    async with (
        litellm_server() as (url, peers),
        GatewayClient(url, "k", dialect="litellm") as client,
    ):
        found = await client.list_models()
    assert [p.request_head.split(b" ", 2)[1] for p in peers] == [b"/v1/models", b"/model/info"]
    assert b"authorization: bearer k" in peers[1].request_head.lower()
    assert [(i.id, i.chat, i.prompt_price, i.completion_price) for i in found] == [
        ("gpt-4o", True, "2.5e-06", "1e-05"),
        ("claude-sonnet", True, "3e-06", "1.5e-05"),
        ("text-embedding-3-small", False, "2e-08", "0.0"),
        ("dall-e-3", False, None, None),
        ("local-llama", True, None, None),
    ]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        ("400 Bad Request", b'{"error": {"message": "No connected db."}}'),  # LiteLLM's, keyless
        ("200 OK", b"<html>"),
        ("200 OK", b'{"data": 5}'),
    ],
)
async def test_a_failing_model_info_leaves_the_list_as_models_gave_it(
    status: str, body: bytes
) -> None:
    async with (
        litellm_server(status, body) as (url, peers),
        GatewayClient(url, "k", dialect="litellm") as client,
    ):
        found = await client.list_models()
    assert len(peers) == 2
    assert found == parse_models(fixture("litellm/models.json"))


async def test_a_dialect_without_a_prices_path_asks_models_alone() -> None:
    async with (
        litellm_server() as (url, peers),
        GatewayClient(url, "k", dialect="vllm") as client,
    ):
        found = await client.list_models()
    assert len(peers) == 1
    assert [info.provider for info in found] == [None] * 5
