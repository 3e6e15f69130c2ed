"""The autouse fixtures every in-process test of the app needs (`tests/chatapp`, `tests/faults`),
in one place: each package's conftest imports them, and pytest uses them from there.

Not in the root conftest: `tests/gateway_client` must run without Django.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from channels.layers import channel_layers

from chatapp.gateways import catalog, clients, configs


@pytest.fixture(autouse=True)
def fresh_channel_layer() -> Iterator[None]:
    """A new in-memory layer per test: its queues belong to one event loop."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def fresh_gateways(settings: Any) -> Iterator[None]:
    """Gateway configs are cached per process; each test has a database of its own. Tests pick
    the emulator's pacing per request (`emulator/long?long_tokens=50`): the app lets them."""
    settings.CHAT_EMULATOR_REQUEST_OPTIONS = True
    # No title generation after every first answer in the ledgers tests read; the title tests
    # turn them on.
    settings.CHAT_TITLES = False
    configs.forget_configs()
    catalog._models_cache.clear()
    catalog._models_failed.clear()
    yield
    configs.forget_configs()


@pytest.fixture(autouse=True)
async def closed_clients() -> AsyncIterator[None]:
    """The test loop's shared gateway clients are closed with it, as at server shutdown."""
    yield
    await clients.close_clients()
