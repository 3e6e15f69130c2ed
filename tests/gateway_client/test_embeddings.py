"""`GatewayClient.embed` against the emulator's `/embeddings` over real loopback HTTP (every
dialect's usage and cost unit, the generation ID, the record), its bounds before sending, and what
it refuses to read back (from a scripted socket server)."""

from __future__ import annotations

import asyncio
import math

import orjson
import pytest

from gateway_client import (
    ConnectError,
    Embeddings,
    GatewayClient,
    ProtocolError,
    StatusError,
    Timeouts,
)
from gateway_client.embeddings import MAX_INPUT_CHARS, MAX_INPUTS
from gateway_client.emulator import EmulatorURL, Registry
from gateway_client.emulator.embeddings import DIMENSIONS, EMBEDDING_MODEL, token_count
from tests.gateway_client.test_client_emulator import COST_UNIT, DIALECTS

QUICK = Timeouts(connect=5, first_token=10, idle=5, total=10)
CORPUS = [
    "The tide rises twice a day because of the moon's pull on the oceans.",
    "Sourdough bread needs a starter of flour and water, fed every day.",
    "A violin has four strings tuned in fifths: G, D, A and E.",
]


def records(url: EmulatorURL) -> Registry:
    registry: Registry = url.app.records  # type: ignore[attr-defined]
    return registry


async def embed(url: EmulatorURL, dialect: str, inputs: list[str], **kw: object) -> Embeddings:
    async with GatewayClient(url + DIALECTS[dialect], "key", timeouts=QUICK) as gw:
        return await gw.embed(model=kw.pop("model", EMBEDDING_MODEL), inputs=inputs, **kw)  # type: ignore[arg-type]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_every_dialect_answers_with_its_usage_and_cost(
    emulator_url: EmulatorURL, dialect: str
) -> None:
    result = await embed(emulator_url, dialect, CORPUS)
    assert len(result.vectors) == 3
    assert result.dimensions == DIMENSIONS
    for vector in result.vectors:
        assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, abs_tol=1e-5)
    assert result.prompt_tokens == sum(token_count(text) for text in CORPUS)
    unit = COST_UNIT[dialect]
    if unit is None:  # tiny-3b reports counts, never a cost
        assert result.cost is None
    else:
        assert result.cost is not None
        assert result.cost.unit == unit
        assert result.cost.amount > 0
    key = result.generation_id or result.request_id
    assert key is not None
    record = await asyncio.to_thread(records(emulator_url).wait_finished, key)
    assert record.endpoint == "embeddings"
    assert record.final_outcome == "completed"
    assert record.tokens_prompt == result.prompt_tokens
    if unit is not None:
        assert record.total_cost == result.cost.amount  # type: ignore[union-attr]


async def test_vectors_are_deterministic_and_retrieve_the_passage(
    emulator_url: EmulatorURL,
) -> None:
    passages = await embed(emulator_url, "numes", CORPUS)
    again = await embed(emulator_url, "nodul", CORPUS)
    assert passages.vectors == again.vectors
    (question,) = (
        await embed(emulator_url, "numes", ["How many strings does a violin have?"])
    ).vectors
    scores = [cosine(question, passage) for passage in passages.vectors]
    assert scores.index(max(scores)) == 2
    assert scores[2] > 2 * max(scores[0], scores[1])


async def test_numes_keeps_a_generation_record(emulator_url: EmulatorURL) -> None:
    async with GatewayClient(emulator_url + DIALECTS["numes"], "key", timeouts=QUICK) as gw:
        result = await gw.embed(model=EMBEDDING_MODEL, inputs=["tides"])
        assert result.generation_id is not None
        record = await gw.get_generation(result.generation_id)
    assert record.outcome == "completed"
    assert record.cost == result.cost


async def test_gateway_error_is_a_status_error(emulator_url: EmulatorURL) -> None:
    with pytest.raises(StatusError) as caught:
        await embed(emulator_url, "numes", ["tides"], model="emulator/error-before")
    assert caught.value.status == 402


async def test_a_body_that_breaks_off_is_not_read_as_vectors(emulator_url: EmulatorURL) -> None:
    with pytest.raises(ConnectError, match="broke off"):
        await embed(emulator_url, "osmexo", ["tides"], model="emulator/drop")


async def test_bounds_are_checked_before_sending(emulator_url: EmulatorURL) -> None:
    before = len(records(emulator_url).all())
    for inputs, message in (
        ([], "no texts"),
        (["x"] * (MAX_INPUTS + 1), "at most 256"),
        (["x" * (MAX_INPUT_CHARS + 1)], "characters"),
        (["ok", ""], "text 1 is empty"),
    ):
        with pytest.raises(ValueError, match=message):
            await embed(emulator_url, "numes", inputs)
    assert len(records(emulator_url).all()) == before


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}, "1 vectors for 2 texts"),
        (
            {"data": [{"index": 0, "embedding": [0.1]}, {"index": 0, "embedding": [0.2]}]},
            "repeated index",
        ),
        (
            {"data": [{"index": 0, "embedding": [0.1]}, {"index": 1, "embedding": [0.2, 0.3]}]},
            "different dimensions",
        ),
        (
            {"data": [{"index": 0, "embedding": ["x"]}, {"index": 1, "embedding": [0.2]}]},
            "finite number",
        ),
        ({"object": "list"}, "no `data` list"),
    ],
)
async def test_unreadable_answers(body: dict[str, object], why: str) -> None:
    raw = orjson.dumps(body)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(raw)}"
        writer.write(head.encode() + b"\r\n\r\n" + raw)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, GatewayClient(f"http://127.0.0.1:{port}/v1", "key", timeouts=QUICK) as gw:
        with pytest.raises(ProtocolError, match=why):
            await gw.embed(model="m", inputs=["a", "b"])


async def test_emulator_lists_its_embedding_model(emulator_url: EmulatorURL) -> None:
    async with GatewayClient(emulator_url + DIALECTS["numes"], "key", timeouts=QUICK) as gw:
        models = {info.id: info for info in await gw.list_models()}
    assert EMBEDDING_MODEL in models
    assert not models[EMBEDDING_MODEL].chat  # the picker never offers it for a turn
