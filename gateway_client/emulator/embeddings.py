"""`POST /embeddings`: deterministic vectors that make retrieval meaningful offline.

A text's vector is the feature hashing of its words and of its words' character trigrams into
`DIMENSIONS` signed buckets, L2-normalised: texts that share words (or, through the trigrams,
forms of a word: "embed", "embedding") have a high cosine similarity, unrelated texts one near
zero. No model, no randomness: the same text gives the same vector in every process, so tests and
benchmarks can compare what a store returns with what they expect.

Each request is a generation (a record, the dialect's IDs and headers) billed at the dialect's
prompt price per token, with the usage object its chat completions carry: Numes' and Nodul's
`usage.cost`, Osmexo's `usage.x_llm_cost_micro`, tiny-3b's counts without a cost.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

from .channel import Channel
from .framing import Dialect
from .options import Options
from .parsing import BadRequest, load_json
from .records import EmulatorRecord, Registry

__all__ = [
    "DIMENSIONS",
    "EMBEDDING_MODEL",
    "EmbeddingRequest",
    "embedding_vector",
    "parse_embedding",
    "run_embeddings",
    "token_count",
]

EMBEDDING_MODEL = "emulator/embedding"
"""The emulator's embedding model; any name that is not `emulator/<scenario>` behaves like it."""
DIMENSIONS = 256
_MAX_INPUTS = 2048
_WORD = re.compile(r"\w+")
_TRIGRAM_WEIGHT = 0.35  # a shared word outweighs a few shared trigrams


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    model: str
    scenario: str
    """`embedding`, or `error-before` (the dialect's error) or `drop` (the body breaks off)."""
    inputs: list[str]


def parse_embedding(body: bytes) -> EmbeddingRequest:
    data = load_json(body)
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise BadRequest("`model` is required and must be a non-empty string.")
    raw = data.get("input")
    inputs = [raw] if isinstance(raw, str) else raw
    if (
        not isinstance(inputs, list)
        or not 0 < len(inputs) <= _MAX_INPUTS
        or not all(isinstance(text, str) and text for text in inputs)
    ):
        raise BadRequest(
            f"`input` must be a non-empty string or a list of 1 to {_MAX_INPUTS} of them."
        )
    if data.get("encoding_format", "float") != "float":
        raise BadRequest("Only `encoding_format: float` is served.")
    scenario = model.removeprefix("emulator/")
    return EmbeddingRequest(
        model=model,
        scenario=scenario if scenario in ("error-before", "drop") else "embedding",
        inputs=inputs,
    )


def token_count(text: str) -> int:
    """What the emulator bills a text as: a token per four characters, at least one."""
    return max(1, math.ceil(len(text) / 4))


def embedding_vector(text: str) -> list[float]:
    buckets = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        _add(buckets, word, 1.0)
        padded = f" {word} "
        for start in range(len(padded) - 2):
            _add(buckets, "#" + padded[start : start + 3], _TRIGRAM_WEIGHT)
    norm = math.sqrt(sum(value * value for value in buckets))
    if norm == 0:
        buckets[0], norm = 1.0, 1.0  # no word at all: one fixed direction
    return [round(value / norm, 7) for value in buckets]


def _add(buckets: list[float], feature: str, weight: float) -> None:
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=4).digest())
    buckets[(digest >> 1) % DIMENSIONS] += weight if digest & 1 else -weight


async def run_embeddings(
    channel: Channel,
    registry: Registry,
    dialect: Dialect,
    options: Options,
    request: EmbeddingRequest,
) -> None:
    ids = dialect.new_ids(text_completion=False)
    tokens = sum(token_count(text) for text in request.inputs)
    record = registry.add(
        EmulatorRecord(
            id=ids.generation_id,
            request_id=ids.request_id,
            dialect=dialect.name,
            endpoint="embeddings",
            model=request.model,
            scenario=request.scenario,
            streamed=False,
            tokens_prompt=tokens,
        )
    )
    if await channel.pause(options.ttft_ms / 1000):
        return registry.finish(record, "cancelled")
    if request.scenario == "error-before":
        reply = dialect.error_reply("before", ids)
        await channel.json(reply.status, reply.body, reply.headers)
        return registry.finish(record, "error", error_code=reply.status)
    cost = dialect.cost(tokens, 0)
    record.total_cost = cost
    body: dict[str, Any] = {
        "id": ids.generation_id,  # tiny-3b's only ID (its request ID inside), as in its chunks
        "object": "list",
        "data": [
            {"object": "embedding", "index": index, "embedding": embedding_vector(text)}
            for index, text in enumerate(request.inputs)
        ],
        "model": request.model,
        "usage": _usage(dialect, tokens),
    }
    headers = dialect.json_headers(ids, request.model, cost)
    if request.scenario == "drop":
        raw = orjson.dumps(body)
        await channel.start(200, headers)
        await channel.write(raw[: len(raw) // 2])
        channel.abort()
        return registry.finish(record, "error", error_code="connection_dropped")
    await channel.json(200, body, headers)
    registry.finish(record, "completed", finish_reason="stop")


def _usage(dialect: Dialect, tokens: int) -> dict[str, Any]:
    """The dialect's usage object, as an embedding's: prompt tokens only."""
    usage = dialect.usage(tokens, 0, 0, estimated=False)
    for key in ("completion_tokens", "completion_tokens_details"):
        usage.pop(key, None)
    return usage
