"""Changing a gateway's embedding model in the admin: what embedding its documents again will
cost is said first, and only a confirmed save changes the model and queues them."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from chatapp.gateways import configs
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.knowledge.models import Chunk, Collection, KnowledgeFile
from chatapp.knowledge.reembedding import estimate

pytestmark = [pytest.mark.django_db]

NEW = "emulator/embedding-large"


def embedded_file(gateway: Gateway, owner: Any, tokens: list[int]) -> KnowledgeFile:
    collection = Collection.objects.create(owner=owner, name="Handbook")
    data = b"# Handbook\n"
    file = KnowledgeFile.objects.create(
        collection=collection,
        added_by=owner,
        name="handbook.md",
        content_type="text/markdown",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        data=data,
        state=KnowledgeFile.State.READY,
        done=len(tokens),
        total=len(tokens),
        embedding_model=gateway.embedding_model,
        embedding_gateway=gateway,
    )
    for ordinal, count in enumerate(tokens):
        Chunk.objects.create(file=file, ordinal=ordinal, text="x" * 4 * count, token_count=count)
    return file


def emulator_row(settings: Any) -> Gateway:
    settings.LLM_BASE_URL = None
    emulator, *_ = configs.add_emulator_gateways()
    return emulator


def test_the_estimate_is_the_chunks_tokens_at_the_new_models_price(
    settings: Any, alice: Any
) -> None:
    gateway = emulator_row(settings)
    embedded_file(gateway, alice, [100, 250, 50])
    unpriced = estimate(gateway.pk, gateway.cost_unit, NEW)
    assert (unpriced.files, unpriced.chunks, unpriced.tokens, unpriced.cost) == (1, 3, 400, None)
    assert "No price is known for emulator/embedding-large" in str(unpriced)
    ModelPrice.objects.create(gateway=gateway, model=NEW, prompt=Decimal("0.0001"), completion=0)
    priced = estimate(gateway.pk, gateway.cost_unit, NEW)
    assert priced.cost is not None
    assert priced.cost.amount == Decimal("0.04")
    assert str(priced) == (
        "Changing the embedding model to emulator/embedding-large embeds 1 document again "
        "(3 passages, 400 tokens): about $0.04 at emulator/embedding-large's price."
    )


def test_the_admin_is_told_the_cost_first_and_only_a_confirmed_save_re_embeds(
    settings: Any, admin_client: Any, alice: Any
) -> None:
    gateway = emulator_row(settings)
    assert gateway.embedding_model == "emulator/embedding"  # a new install embeds at once
    file = embedded_file(gateway, alice, [100, 300])
    ModelPrice.objects.create(gateway=gateway, model=NEW, prompt=Decimal("0.0001"), completion=0)
    change = reverse("admin:chatapp_gateway_change", args=[gateway.pk])
    form = {
        "name": gateway.name,
        "base_url": gateway.base_url,
        "dialect": gateway.dialect,
        "cost_unit": gateway.cost_unit,
        "enabled": "on",
        "speech_model": gateway.speech_model,
        "title_model": gateway.title_model,
        "embedding_model": NEW,
    }

    asked = admin_client.post(change, form)
    assert asked.status_code == 200
    assert "(2 passages, 400 tokens): about $0.04" in asked.content.decode()
    gateway.refresh_from_db()
    file.refresh_from_db()
    assert gateway.embedding_model == "emulator/embedding"
    assert file.state == KnowledgeFile.State.READY

    saved = admin_client.post(change, {**form, "reembed": "on"}, follow=True)
    assert "1 document queued." in saved.content.decode()
    gateway.refresh_from_db()
    file.refresh_from_db()
    assert gateway.embedding_model == NEW
    assert (file.state, file.done) == (KnowledgeFile.State.QUEUED, 0)
    (task,) = DBTaskResult.objects.all()
    assert task.task_path == "chatapp.knowledge.tasks.index_file"
    assert task.args_kwargs["args"] == [file.pk]
    assert file.chunks.count() == 2  # only the vectors are made again
