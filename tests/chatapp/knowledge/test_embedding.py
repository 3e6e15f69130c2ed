"""`knowledge.embedding.embed_texts` against the real emulator over loopback HTTP: every request a
generation of kind `embedding` on the ledger, linked to what it was for, its cost settled in the
gateway's unit, reserved against the spending limits before anything is sent."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.costs.spend import month_spend
from chatapp.gateways import configs
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways.units import CostUnit
from chatapp.knowledge.embedding import (
    BATCH_TEXTS,
    EmbeddingFailed,
    EmbeddingFor,
    EmbeddingRefused,
    EmbeddingSetup,
    batches,
    embed_texts,
    embedding_setup,
)
from chatapp.knowledge.models import Collection
from chatapp.streaming import sweep
from gateway_client.emulator import EMBEDDING_MODEL
from gateway_client.emulator.embeddings import embedding_vector
from tests.chatapp.conftest import UpstreamLog
from tests.chatapp.costs.test_spending_limits import limit

pytestmark = [pytest.mark.django_db(transaction=True)]

TEXTS = [
    "Otters hold hands while they sleep so that they do not drift apart.",
    "The tide rises twice a day because of the moon.",
    "A violin has four strings tuned in fifths.",
]


async def setup_for(model: str = EMBEDDING_MODEL) -> EmbeddingSetup:
    """The default gateway (the emulator's Numes, configured by `LLM_*`) embedding with `model`."""

    def prepare() -> EmbeddingSetup:
        _, pk = configs.configs(force=True)
        Gateway.objects.filter(pk=pk).update(embedding_model=model)
        configs.forget_configs()
        found = embedding_setup(None)
        assert found is not None
        return found

    return await sync_to_async(prepare)()


async def ledger() -> list[Generation]:
    return [
        g async for g in Generation.objects.filter(kind=Generation.Kind.EMBEDDING).order_by("pk")
    ]


async def test_ingestion_is_a_generation_of_the_collection_with_the_gateways_cost(
    alice: Any, upstream: UpstreamLog
) -> None:
    setup = await setup_for()
    collection = await Collection.objects.acreate(owner=alice, name="Handbook")
    vectors = await embed_texts(TEXTS, setup, EmbeddingFor(alice.pk, collection_pk=collection.pk))
    assert vectors == [embedding_vector(text) for text in TEXTS]
    (record,) = upstream.new(endpoint="embeddings")
    (generation,) = await ledger()
    assert generation.collection_id == collection.pk
    assert generation.user_id == alice.pk
    assert generation.conversation_id is None
    assert generation.status == Generation.Status.COMPLETED
    assert generation.model == EMBEDDING_MODEL
    assert generation.upstream_id == record.id
    assert generation.prompt_tokens == record.tokens_prompt
    assert generation.completion_tokens == 0
    assert generation.cost_source == Generation.CostSource.STREAM
    assert generation.cost == Decimal(str(record.total_cost))
    assert generation.cost_unit == CostUnit.USD  # the Numes row's unit for `usage.cost`


async def test_a_question_is_a_generation_of_its_conversation_and_message(alice: Any) -> None:
    setup = await setup_for()
    conversation = await Conversation.objects.acreate(user=alice, title="Tides")
    question = await Message.objects.acreate(
        conversation=conversation, role=Message.Role.USER, content="Why two tides?"
    )
    purpose = EmbeddingFor(alice.pk, conversation_pk=conversation.pk, question_pk=question.pk)
    (vector,) = await embed_texts(["Why two tides?"], setup, purpose)
    assert len(vector) == 256
    (generation,) = await ledger()
    assert (generation.conversation_id, generation.question_id) == (conversation.pk, question.pk)
    assert generation.collection_id is None


async def test_many_texts_go_in_batches_each_its_own_generation(
    alice: Any, upstream: UpstreamLog
) -> None:
    setup = await setup_for()
    texts = [f"passage number {n} about otters" for n in range(BATCH_TEXTS + 10)]
    vectors = await embed_texts(texts, setup, EmbeddingFor(alice.pk))
    assert vectors == [embedding_vector(text) for text in texts]
    assert len(upstream.new(endpoint="embeddings")) == 2
    assert [g.status for g in await ledger()] == [Generation.Status.COMPLETED] * 2


def test_batches_hold_a_bounded_number_of_tokens() -> None:
    big = "word " * 3_000  # 3,750 counted tokens
    assert [len(batch) for batch in batches([big] * 9)] == [4, 4, 1]
    with pytest.raises(ValueError, match="1 to 32000 characters"):
        list(batches(["ok", ""]))


async def test_over_a_spending_limit_nothing_is_sent_and_no_row_is_made(
    alice: Any, upstream: UpstreamLog
) -> None:
    setup = await setup_for()
    await ModelPrice.objects.acreate(
        gateway_id=setup.config.pk, model=EMBEDDING_MODEL, prompt=Decimal("0.01"), completion=0
    )
    await limit("0.05", user=alice)
    with pytest.raises(EmbeddingRefused, match="could cost up to"):
        await embed_texts(TEXTS, setup, EmbeddingFor(alice.pk))
    assert upstream.new(endpoint="embeddings") == []
    assert await ledger() == []


async def test_a_gateway_error_is_a_failed_generation_that_cost_nothing(
    alice: Any, upstream: UpstreamLog
) -> None:
    setup = await setup_for("emulator/error-before")
    with pytest.raises(EmbeddingFailed, match="Insufficient credits"):
        await embed_texts(TEXTS, setup, EmbeddingFor(alice.pk))
    (generation,) = await ledger()
    assert generation.status == Generation.Status.FAILED
    assert generation.error_status == 402
    assert generation.cost_source == Generation.CostSource.NOT_BILLED
    assert upstream.new(endpoint="embeddings")[0].final_outcome == "error"


async def test_the_admins_cost_history_lists_it_by_kind_and_collection_and_the_user_sees_it(
    alice: Any, admin_user: Any
) -> None:
    setup = await setup_for()
    handbook = await Collection.objects.acreate(owner=alice, name="Handbook")
    other = await Collection.objects.acreate(owner=alice, name="Recipes")
    await embed_texts(TEXTS, setup, EmbeddingFor(alice.pk, collection_pk=handbook.pk))
    await embed_texts(TEXTS[:1], setup, EmbeddingFor(alice.pk, collection_pk=other.pk))
    first, _ = await ledger()
    admin = AsyncClient()
    await admin.aforce_login(admin_user)
    listed = await admin.get(
        reverse("admin:chatapp_generation_changelist"),
        {"kind": "embedding", "collection": str(handbook.pk)},
    )
    assert listed.status_code == 200
    assert listed.context["cl"].result_count == 1
    (total,) = listed.context["cost_totals"].totals
    assert (total.unit, total.amount) == (CostUnit.USD, first.cost)
    assert f"Documents of collection #{handbook.pk}" in listed.content.decode()
    # A collection's documents are embedded in no conversation: none, not a "deleted" one.
    assert '<td class="field-conversation_link">-</td>' in listed.content.decode()
    assert ">deleted<" not in listed.content.decode()
    assert "Handbook (alice)" in listed.content.decode()  # the filter's choice

    line = await sync_to_async(month_spend)(alice)
    everything = sum([g.cost for g in await ledger() if g.cost is not None], Decimal(0))
    assert line.dollars is not None
    assert line.dollars.amount == everything  # both collections' embeddings, in the user's month


async def emulated(dialect: str) -> EmbeddingSetup:
    """The emulator's gateway row of `dialect` (each embeds with `emulator/embedding`)."""

    def find() -> EmbeddingSetup:
        rows = {row.dialect: row for row in configs.add_emulator_gateways()}
        found = embedding_setup(rows[dialect].pk)
        assert found is not None
        assert found.config.pk == rows[dialect].pk
        return found

    return await sync_to_async(find)()


async def test_osmexos_cost_is_in_micro_dollars_as_its_answers_are(
    settings: Any, alice: Any
) -> None:
    settings.LLM_BASE_URL = None
    setup = await emulated("osmexo")
    await embed_texts(TEXTS, setup, EmbeddingFor(alice.pk))
    (generation,) = await ledger()
    assert generation.cost_unit == CostUnit.MICRO_USD
    assert generation.prompt_tokens is not None
    # The emulator's Osmexo bills 0.15 micro-dollars a prompt token, in whole micro-dollars.
    assert generation.cost == round(generation.prompt_tokens * Decimal("0.15"))
    assert generation.cost_source == Generation.CostSource.STREAM


async def test_tiny_reports_no_cost_so_it_is_estimated_from_the_tokens_at_the_price(
    settings: Any, alice: Any
) -> None:
    settings.LLM_BASE_URL = None
    setup = await emulated("tiny")
    await ModelPrice.objects.acreate(
        gateway_id=setup.config.pk, model=EMBEDDING_MODEL, prompt=Decimal("0.000001"), completion=0
    )
    await embed_texts(TEXTS, setup, EmbeddingFor(alice.pk))
    (generation,) = await ledger()
    assert generation.cost_source == Generation.CostSource.ESTIMATE
    assert generation.prompt_tokens is not None
    assert generation.cost == generation.prompt_tokens * Decimal("0.000001")
    assert "estimated" in generation.cost_note


async def test_an_embedding_whose_process_died_is_interrupted_by_the_sweep_as_answerless(
    alice: Any,
) -> None:
    setup = await setup_for()
    stale = await Generation.objects.acreate(
        kind=Generation.Kind.EMBEDDING,
        user=alice,
        gateway_id=setup.config.pk,
        model=EMBEDDING_MODEL,
        heartbeat_at=timezone.now() - timedelta(minutes=5),
    )
    assert await sweep.sweep_stale_generations() == 1
    await stale.arefresh_from_db()
    assert stale.status == Generation.Status.INTERRUPTED
    assert stale.error_message == "The server stopped while these texts were being embedded."
    assert stale.cost_source == Generation.CostSource.PENDING  # for the sweep's reconciliation
