"""The autouse fixtures every in-process test of the app needs (`tests/chatapp`, `tests/faults`),
in one place: each package's conftest imports them, and pytest uses them from there.

Not in the root conftest: `tests/gateway_client` must run without Django.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from channels.layers import channel_layers

from chatapp import gateway


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    """A new in-memory layer per test: its queues belong to one event loop."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def fresh_gateways() -> Iterator[None]:
    """Gateway configs are cached per process; each test has a database of its own."""
    gateway.forget_configs()
    gateway._models_cache.clear()
    yield
    gateway.forget_configs()


@pytest.fixture(autouse=True)
async def closed_clients() -> AsyncIterator[None]:
    """The test loop's shared gateway clients are closed with it, as at server shutdown."""
    yield
    await gateway.close_clients()
