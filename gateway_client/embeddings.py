"""`embed`: one OpenAI-compatible `POST /embeddings` request, its vectors, usage and cost.

Unlike a chat stream the answer is one JSON document, so it is read whole, under a byte cap that
follows from what was asked (inputs times the largest dimension we accept), within one deadline: a
gateway that sends more, or vectors of differing or absurd dimension, is a `ProtocolError`, not a
memory spike. Sizes are bounded before anything is sent (`MAX_INPUTS` texts of at most
`MAX_INPUT_CHARS` each): splitting a document into batches is the caller's job, because each
request is one generation the caller accounts for.

None of the four gateways' documents describes embeddings; the usage object is read as their
chat completions' is (`chunks.parse_usage`: `usage.cost` in the key's currency, Osmexo's
`usage.x_llm_cost_micro`, or its `X-LLM-Cost-Micro` header), and the generation ID from the
`X-Generation-Id` header or the body's `id`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx
import orjson

from .chunks import parse_usage
from .dialects import header_request_id
from .errors import ConnectError, GatewayTimeout, ProtocolError
from .events import Cost, Usage
from .retries import RetryBudget
from .stream_client import StreamClient

__all__ = [
    "MAX_DIMENSIONS",
    "MAX_INPUTS",
    "MAX_INPUT_CHARS",
    "Embeddings",
    "embed",
]

MAX_INPUTS: Final = 256
"""Texts per request (OpenAI takes 2,048; most hosted models far fewer tokens per request)."""
MAX_INPUT_CHARS: Final = 32_000
"""Characters per text: about 8,000 tokens, the common embedding models' context."""
MAX_DIMENSIONS: Final = 8_192
"""The largest vector we accept (the largest hosted models make 4,096)."""
_BYTES_PER_NUMBER: Final = 28  # `-0.012345678901234567,` with room for exponents and spaces
_ENVELOPE_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Embeddings:
    """One request's answer: a vector per input, in input order, each of `dimensions` floats."""

    vectors: list[list[float]]
    model: str
    usage: Usage | None
    generation_id: str | None
    request_id: str | None

    @property
    def dimensions(self) -> int:
        return len(self.vectors[0]) if self.vectors else 0

    @property
    def cost(self) -> Cost | None:
        return None if self.usage is None else self.usage.cost

    @property
    def prompt_tokens(self) -> int | None:
        return None if self.usage is None else self.usage.prompt_tokens


def check_inputs(inputs: Sequence[str]) -> None:
    """`ValueError` for a batch that must not be sent (empty, too many or too long texts)."""
    if not inputs:
        raise ValueError("no texts to embed")
    if len(inputs) > MAX_INPUTS:
        raise ValueError(f"{len(inputs)} texts in one request; at most {MAX_INPUTS}")
    for index, text in enumerate(inputs):
        if not text:
            raise ValueError(f"text {index} is empty")
        if len(text) > MAX_INPUT_CHARS:
            raise ValueError(f"text {index} has {len(text)} characters; at most {MAX_INPUT_CHARS}")


async def embed(
    client: StreamClient,
    url: str,
    *,
    model: str,
    inputs: Sequence[str],
    retries: RetryBudget | None = None,
    **extra: Any,
) -> Embeddings:
    """POST `inputs` to `url` (a gateway's `/embeddings`) and read the vectors back."""
    check_inputs(inputs)
    body: dict[str, Any] = {"model": model, "input": list(inputs), "encoding_format": "float"}
    body.update(extra)
    timeouts = client.timeouts
    seconds = timeouts.total or timeouts.first_token
    loop = asyncio.get_running_loop()
    deadline = None if seconds is None else loop.time() + seconds
    response = await client.open(
        url,
        body,
        accept="application/json",
        deadline=deadline,
        retries=RetryBudget() if retries is None else retries,
    )
    media_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise await client.read_status_error(response)
    cap = min(
        client.limits.max_body_bytes,
        _ENVELOPE_BYTES + len(inputs) * MAX_DIMENSIONS * _BYTES_PER_NUMBER,
    )
    request_id = header_request_id(response.headers, client.dialect)
    raw = await _read(response, cap, deadline, request_id)
    return parse_embeddings(raw, len(inputs), response.headers, request_id)


async def _read(
    response: httpx.Response, cap: int, deadline: float | None, request_id: str | None
) -> bytes:
    body = bytearray()
    try:
        async with asyncio.timeout_at(deadline):
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) > cap:
                    raise ProtocolError(
                        f"the embeddings grew past {cap} bytes", request_id=request_id
                    )
    except TimeoutError:
        raise GatewayTimeout("the embeddings did not arrive in time", phase="total") from None
    except httpx.HTTPError as exc:
        raise ConnectError(f"the embeddings broke off: {exc}", request_id=request_id) from exc
    finally:
        await response.aclose()
    return bytes(body)


def parse_embeddings(
    raw: bytes, count: int, headers: httpx.Headers, request_id: str | None
) -> Embeddings:
    """The body of a 200 `/embeddings` answer, checked: `count` vectors, one per `index`, all of
    one dimension, every number finite."""

    def fail(why: str) -> ProtocolError:
        return ProtocolError(f"unreadable embeddings: {why}", request_id=request_id)

    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise fail(f"not JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(data := document.get("data"), list):
        raise fail("no `data` list")
    if len(data) != count:
        raise fail(f"{len(data)} vectors for {count} texts")
    vectors: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise fail(f"item {position} is not an object")
        index = item.get("index", position)
        if type(index) is not int or not 0 <= index < count or vectors[index] is not None:
            raise fail(f"item {position} has a bad or repeated index")
        vectors[index] = _vector(item.get("embedding"), fail)
    dimensions = {len(vector) for vector in vectors if vector is not None}
    if len(dimensions) != 1:
        raise fail("vectors of different dimensions")
    usage = document.get("usage")
    parsed = parse_usage(usage) if isinstance(usage, dict) else None
    micro = headers.get("x-llm-cost-micro")
    if parsed is not None and parsed.cost is None and micro is not None and micro.isdigit():
        parsed = Usage(parsed.raw, Cost(int(micro), "micro_usd", False), parsed.prompt_tokens)
    body_id = document.get("id")
    generation_id = headers.get("x-generation-id") or (
        body_id if isinstance(body_id, str) and body_id else None
    )
    model = document.get("model")
    return Embeddings(
        vectors=[vector for vector in vectors if vector is not None],
        model=model if isinstance(model, str) else "",
        usage=parsed,
        generation_id=generation_id,
        request_id=request_id,
    )


def _vector(value: object, fail: Callable[[str], ProtocolError]) -> list[float]:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_DIMENSIONS:
        raise fail("an embedding is not a list of at most MAX_DIMENSIONS numbers")
    vector: list[float] = []
    for number in value:
        if type(number) not in (float, int) or not math.isfinite(number):
            raise fail("an embedding holds something other than a finite number")
        vector.append(float(number))
    return vector
