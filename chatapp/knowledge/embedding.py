"""Texts to vectors through a gateway's `/embeddings`, every request a generation on the ledger.

Nobody sees an embedding call happen, so each is accounted for like an answer: one
`Generation` of kind `embedding` per request, linked to the collection whose documents it
embedded (ingestion) or to the user's message whose question it embedded (retrieval), whose
spend it is. Before a request is sent its worst case (its texts counted at about four characters
a token, at the model's price; an embedding makes no completion) is reserved against the
spending limits in the transaction that creates its row, as a read aloud's is; a limit it would
cross refuses it (`EmbeddingRefused`) and nothing is sent. Its cost is settled as a chat
answer's, by the same `costs.settling.settle`: the usage object's amount in the gateway's unit,
else the gateway's record, else an estimate from the tokens at the model's price, else the reason
there is none.

Texts go in batches (`batches`: at most `BATCH_TEXTS` texts and `BATCH_TOKENS` counted tokens a
request), one request at a time: ingestion runs off the request path (`tasks`), where throughput
matters less than a gateway's rate limits. A row beats while its request runs, so that the sweep
of another process never takes a slow one for dead.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from chatapp.costs import settling, spending_limits
from chatapp.costs.costing import CHARS_PER_TOKEN, not_billed_reason, record_expected
from chatapp.costs.models import Generation
from chatapp.costs.settling import FinalState
from chatapp.errors import ChatAppError
from chatapp.gateways.clients import shared_client
from chatapp.gateways.configs import GatewayConfig, configs
from chatapp.gateways.units import exact, stream_unit
from gateway_client.dialects import guess_dialect
from gateway_client.embeddings import MAX_INPUT_CHARS, MAX_INPUTS
from gateway_client.errors import GatewayError

if TYPE_CHECKING:
    from gateway_client import Embeddings, GatewayClient
    from gateway_client.errors import ErrorInfo

__all__ = [
    "BATCH_TEXTS",
    "BATCH_TOKENS",
    "EmbeddingFailed",
    "EmbeddingFor",
    "EmbeddingRefused",
    "EmbeddingSetup",
    "batches",
    "counted_tokens",
    "embed_texts",
    "embedding_setup",
]

EMBEDDING = Generation.Kind.EMBEDDING
Status = Generation.Status
BATCH_TEXTS = 64
BATCH_TOKENS = 16_000
"""A request's counted tokens: under the common hosted models' per-request cap (OpenAI's is
300,000; several smaller gateways take 8,192 per text and a few tens of thousands a request)."""
BEAT_EVERY = 5.0  # seconds; well inside `CHAT_STALE_AFTER`


@dataclass(frozen=True, slots=True)
class EmbeddingSetup:
    """The gateway and the model texts are embedded with (a collection's files and the questions
    asked of them must use the same, or their vectors cannot be compared)."""

    config: GatewayConfig
    model: str


@dataclass(frozen=True, slots=True)
class EmbeddingFor:
    """Whose spend an embedding is, and what it is for on the ledger: a collection's documents,
    or a question (its conversation and the user's message)."""

    user_pk: int | None
    collection_pk: int | None = None
    conversation_pk: int | None = None
    question_pk: int | None = None


class EmbeddingRefused(ChatAppError):
    """Not sent: over a spending limit (the words say which), or no gateway embeds."""


class EmbeddingFailed(ChatAppError):
    """The gateway did not embed the texts; `info` says why, as the ledger row does."""

    def __init__(self, message: str, info: ErrorInfo) -> None:
        super().__init__(message)
        self.info = info


def embedding_setup(gateway_pk: int | None) -> EmbeddingSetup | None:
    """The gateway `gateway_pk` when an admin gave it an embedding model, else the default
    gateway when it has one (the emulator's has), else None. Database work on a cold cache."""
    found, default_pk = configs()
    for pk in (gateway_pk, default_pk):
        config = None if pk is None else found.get(pk)
        if config is not None and config.embedding_model:
            return EmbeddingSetup(config, config.embedding_model)
    return None


def counted_tokens(text: str) -> int:
    """A text's tokens as the limits and estimates count them (no tokenizer is bundled)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def batches(texts: Sequence[str]) -> Iterator[list[str]]:
    """`texts` in order, in requests of at most `BATCH_TEXTS` texts and `BATCH_TOKENS` counted
    tokens (a longer text goes alone); `ValueError` for a text no request may carry."""
    batch: list[str] = []
    tokens = 0
    for text in texts:
        if not text or len(text) > MAX_INPUT_CHARS:
            raise ValueError(f"a text to embed must have 1 to {MAX_INPUT_CHARS} characters")
        size = counted_tokens(text)
        if batch and (len(batch) == min(BATCH_TEXTS, MAX_INPUTS) or tokens + size > BATCH_TOKENS):
            yield batch
            batch, tokens = [], 0
        batch.append(text)
        tokens += size
    if batch:
        yield batch


async def embed_texts(
    texts: Sequence[str],
    setup: EmbeddingSetup,
    purpose: EmbeddingFor,
    ledger: list[int] | None = None,
) -> list[list[float]]:
    """A vector per text, in order. `EmbeddingRefused` before a request a spending limit would
    not pay for, `EmbeddingFailed` when the gateway did not answer with vectors; the batches
    embedded before either stay on the ledger, as what they cost. Each batch's ledger row is
    added to `ledger`: a question is embedded before its message exists, which links them after
    (`knowledge_choice.link_question`)."""
    vectors: list[list[float]] = []
    for batch in batches(texts):
        vectors += await _embed_batch(batch, setup, purpose, ledger)
    return vectors


async def _embed_batch(
    batch: list[str], setup: EmbeddingSetup, purpose: EmbeddingFor, ledger: list[int] | None
) -> list[list[float]]:
    generation_pk = await sync_to_async(_start)(batch, setup, purpose)
    if ledger is not None:
        ledger.append(generation_pk)
    client = shared_client(setup.config)
    beating = asyncio.get_running_loop().create_task(_beat(generation_pk))
    try:
        result = await client.embed(model=setup.model, inputs=batch)
    except GatewayError as exc:
        beating.cancel()
        await _end(client, generation_pk, purpose, Status.FAILED, batch, error=exc)
        said = f"The gateway did not embed the text: {exc.info.message}"
        raise EmbeddingFailed(said, exc.info) from exc
    except asyncio.CancelledError:
        beating.cancel()
        await asyncio.shield(_end(client, generation_pk, purpose, Status.CANCELLED, batch))
        raise
    beating.cancel()
    await _end(client, generation_pk, purpose, Status.COMPLETED, batch, result=result)
    return result.vectors


def _start(batch: list[str], setup: EmbeddingSetup, purpose: EmbeddingFor) -> int:
    """The batch's `streaming` row, its worst case reserved under the limits' locks."""
    config = setup.config
    ceiling = spending_limits.ceiling_for(
        config.pk,
        config.cost_unit,
        setup.model,
        [{"content": text} for text in batch],
        None,
        EMBEDDING,
    )
    with transaction.atomic():
        watch = None
        if purpose.user_pk is not None:
            try:
                watch = spending_limits.reserve(purpose.user_pk, config.pk, ceiling, EMBEDDING)
            except spending_limits.SpendingLimitReached as exc:
                raise EmbeddingRefused(str(exc)) from exc
        generation = Generation.objects.create(
            kind=EMBEDDING,
            user_id=purpose.user_pk,
            collection_id=purpose.collection_pk,
            conversation_id=purpose.conversation_pk,
            question_id=purpose.question_pk,
            gateway_id=config.pk,
            model=setup.model[:200],
            dialect=config.dialect or guess_dialect(config.base_url) or "",
            heartbeat_at=timezone.now(),
            spend_ceiling=None if watch is None else watch.reserved,
        )
    return generation.pk


async def _beat(generation_pk: int) -> None:
    while True:
        await asyncio.sleep(BEAT_EVERY)
        await Generation.objects.filter(pk=generation_pk, status=Status.STREAMING).aupdate(
            heartbeat_at=timezone.now()
        )


async def _end(
    client: GatewayClient,
    generation_pk: int,
    purpose: EmbeddingFor,
    status: Generation.Status,
    batch: list[str],
    *,
    result: Embeddings | None = None,
    error: GatewayError | None = None,
) -> None:
    counted = sum(counted_tokens(text) for text in batch)
    final = await sync_to_async(_write_end)(generation_pk, status, counted, result, error)
    await settling.settle(client, generation_pk, purpose.user_pk, final)


def _write_end(
    generation_pk: int,
    status: Generation.Status,
    counted: int,
    result: Embeddings | None,
    error: GatewayError | None,
) -> FinalState:
    """The row's terminal state and what the request reported (the input's `counted` tokens
    where it reported none); what settling its cost needs."""
    now = timezone.now()
    with transaction.atomic():
        generation = (
            Generation.objects.select_for_update(of=("self",))
            .select_related("gateway")
            .get(pk=generation_pk)
        )
        if generation.status != Status.STREAMING:  # the sweep interrupted it: one end
            return FinalState(upstream_id=generation.upstream_id, cost_pending=False)
        generation.status = status
        generation.finished_at = generation.heartbeat_at = now
        if result is not None:
            generation.upstream_id = (result.generation_id or "")[:200]
            generation.request_id = (result.request_id or "")[:200]
            generation.served_model = result.model[:200]
            _apply_usage(generation, result)
            if generation.prompt_tokens is None:
                generation.prompt_tokens = counted
        if error is not None:
            info = error.info
            generation.request_id = (error.request_id or "")[:200]
            generation.error_status = info.status
            generation.error_code = "" if info.code is None else str(info.code)[:100]
            generation.error_type = (info.type or "")[:100]
            generation.error_message = info.message
        if generation.cost is None:
            free = not_billed_reason(generation, delivered_output=result is not None)
            if free is not None:
                generation.cost_source = Generation.CostSource.NOT_BILLED
                generation.cost_note = free
        generation.save()
    return FinalState(
        upstream_id=generation.upstream_id,
        cost_pending=generation.cost_source == Generation.CostSource.PENDING,
        record_expected=record_expected(generation),
    )


def _apply_usage(generation: Generation, result: Embeddings) -> None:
    generation.completion_tokens = 0  # an embedding makes none: an estimate counts the input
    usage = result.usage
    if usage is None:
        return
    generation.usage = usage.raw
    generation.prompt_tokens = usage.prompt_tokens
    cost = usage.cost
    if cost is not None:
        gateway_unit = generation.gateway.cost_unit if generation.gateway else ""
        generation.cost = exact(cost.amount)
        generation.cost_unit = stream_unit(cost.unit, gateway_unit)
        if cost.estimated:
            generation.cost_source = Generation.CostSource.ESTIMATE
            generation.cost_note = "estimated by the gateway (the provider reported no usage)"
        else:
            generation.cost_source = Generation.CostSource.STREAM
