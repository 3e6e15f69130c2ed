"""Fixtures for knowledge collections: the emulator's gateway embedding (as an admin sets it),
a collection of Alice's, and files added through `files.add_file`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chatapp.gateways import configs
from chatapp.gateways.models import Gateway
from chatapp.knowledge.files import add_file
from chatapp.knowledge.models import Collection, KnowledgeFile
from gateway_client.emulator import EMBEDDING_MODEL


@pytest.fixture
def embedding_gateway(db: None) -> Gateway:
    """The default gateway (the emulator's, configured by `LLM_*`) with its embedding model."""
    _, pk = configs.configs(force=True)
    Gateway.objects.filter(pk=pk).update(embedding_model=EMBEDDING_MODEL)
    configs.forget_configs()
    return Gateway.objects.get(pk=pk)


@pytest.fixture
def handbook(alice: Any) -> Collection:
    return Collection.objects.create(owner=alice, name="Handbook", description="How we work")


@pytest.fixture
def added(alice: Any) -> Callable[..., KnowledgeFile]:
    def add(collection: Collection, name: str, data: bytes | str) -> KnowledgeFile:
        raw = data.encode() if isinstance(data, str) else data
        return add_file(collection, name, raw, alice.pk)

    return add
