"""The passages of a user's collections most relevant to a question, within a token budget.

Hybrid: the question's nearest chunks by vector (embedded through the gateway with the model
each file's vectors were made with: one embedding call per model in use, usually one) and its
best chunks by full text, fused by reciprocal rank (each list gives a chunk 1 / (60 + rank);
Cormack et al.'s k = 60), so neither list's scores need to be comparable with the other's. A
name or a number the embedding misses is found by its words; a paraphrase by its meaning.

Only collections the user may use are searched (`access/shared_or_own.visible_to`), and only
their files that are ready; whatever ids a request names, the rest are ignored as if absent.
When the question cannot be embedded (a spending limit, the gateway failing), retrieval goes on
with full text alone: the answer still gets the passages its words find.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.db.models import Q

from chatapp.access.shared_or_own import visible_to
from chatapp.gateways.configs import configs
from chatapp.knowledge.embedding import (
    EmbeddingFailed,
    EmbeddingFor,
    EmbeddingRefused,
    EmbeddingSetup,
    embed_texts,
)
from chatapp.knowledge.models import Chunk, Collection, KnowledgeFile
from chatapp.knowledge.passages import Passage
from chatapp.knowledge.stores import full_text_index, vector_store
from chatapp.knowledge.stores.base import Hit, Scope

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

CANDIDATES = 40  # chunks each search contributes to the fusion
RRF_K = 60


async def retrieve(
    user: User,
    collection_ids: Sequence[int],
    file_ids: Sequence[int],
    question: str,
    *,
    token_budget: int,
    conversation_pk: int | None = None,
    question_pk: int | None = None,
    ledger: list[int] | None = None,
) -> list[Passage]:
    """The passages for `question` from the collections and files named that `user` may use,
        best first, their tokens together within `token_budget`. The question's embedding calls are
        the user's spend, linked to `conversation_pk` and `question_pk` (the user's message), their
    ledger rows added to `ledger` (`embedding.embed_texts`)."""
    if not question.strip() or token_budget < 1:
        return []
    scope, models = await sync_to_async(_scope)(user, collection_ids, file_ids)
    if not scope.file_ids:
        return []
    ranked = [await sync_to_async(full_text_index().search)(question, scope, CANDIDATES)]
    purpose = EmbeddingFor(user.pk, conversation_pk=conversation_pk, question_pk=question_pk)
    for setup in await sync_to_async(_setups)(models):
        try:
            (vector,) = await embed_texts([question], setup, purpose, ledger)
        except (EmbeddingRefused, EmbeddingFailed) as exc:
            logger.warning("Retrieval by full text only: the question was not embedded: %s", exc)
            continue
        ranked.append(
            await sync_to_async(vector_store().nearest)(setup.model, vector, scope, CANDIDATES)
        )
    return await sync_to_async(_passages)(fused(ranked), token_budget)


def fused(rankings: Sequence[Sequence[Hit]]) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: (chunk id, score), best first (ties by chunk id)."""
    scores: dict[int, float] = defaultdict(float)
    for hits in rankings:
        for rank, hit in enumerate(hits, 1):
            scores[hit.chunk_id] += 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _scope(
    user: User, collection_ids: Sequence[int], file_ids: Sequence[int]
) -> tuple[Scope, set[tuple[int | None, str]]]:
    """The ready files named (directly or by their collection) that `user` may use, and the
    (gateway, model) pairs their vectors were made with."""
    visible = Collection.objects.filter(visible_to(user)).values("pk")
    named = Q(collection_id__in=list(collection_ids)) | Q(pk__in=list(file_ids))
    rows = list(
        KnowledgeFile.objects.filter(named, collection_id__in=visible)
        .filter(state=KnowledgeFile.State.READY)
        .values_list("pk", "collection_id", "embedding_gateway_id", "embedding_model")
        .distinct()
    )
    scope = Scope(
        tuple(sorted({collection for _, collection, _, _ in rows})),
        tuple(sorted(pk for pk, _, _, _ in rows)),
    )
    return scope, {(gateway, model) for _, _, gateway, model in rows if model}


def _setups(models: set[tuple[int | None, str]]) -> list[EmbeddingSetup]:
    found, _ = configs()
    return [
        EmbeddingSetup(found[gateway], model)
        for gateway, model in sorted(models, key=str)
        if gateway is not None and gateway in found
    ]


def _passages(ranked: list[tuple[int, float]], token_budget: int) -> list[Passage]:
    chunks = Chunk.objects.select_related("file").only(
        "pk", "text", "page", "heading", "token_count", "file__id", "file__name"
    )
    by_pk = chunks.in_bulk([pk for pk, _ in ranked])
    passages: list[Passage] = []
    left = token_budget
    for pk, score in ranked:
        chunk = by_pk.get(pk)
        if chunk is None or chunk.token_count > left:
            continue
        left -= chunk.token_count
        passages.append(
            Passage(
                chunk.pk,
                chunk.file_id,
                chunk.file.name,
                chunk.page,
                chunk.heading,
                chunk.text,
                score,
            )
        )
    return passages
