"""`gateways.clients`: one client per gateway per loop, closed with its loop."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from chatapp.gateways import clients
from chatapp.gateways.configs import GatewayConfig
from gateway_client import ModelInfo
from gateway_client.emulator import EmulatorURL

type Run = Callable[[Callable[[], Coroutine[Any, Any, list[ModelInfo]]]], list[ModelInfo]]


def run_in_new_loop(
    function: Callable[[], Coroutine[Any, Any, list[ModelInfo]]],
) -> list[ModelInfo]:
    return asyncio.run(function())


def run_as_django_does(
    function: Callable[[], Coroutine[Any, Any, list[ModelInfo]]],
) -> list[ModelInfo]:
    """An async view under the sync test client, or a management command: a loop of its own."""
    return async_to_sync(function)()


@pytest.mark.parametrize("run", [run_in_new_loop, run_as_django_does])
def test_a_client_closes_with_the_loop_it_was_made_on(emulator_url: EmulatorURL, run: Run) -> None:
    """Each loop's client was dropped unclosed when its loop ended, and aiohttp logged
    "Unclosed client session" for each at exit (or when the next loop's replaced it): as a
    warning, then through the loop's exception handler."""
    config = GatewayConfig(
        pk=-1,
        name="emulator",
        base_url=f"{emulator_url}/numes/api/v1",
        api_key="test-key",
        dialect="numes",
        cost_unit="credits",
        emulated=False,
    )

    async def listed() -> list[ModelInfo]:
        return await clients.shared_client(config).list_models()

    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", ResourceWarning)  # else an error, which `__del__` eats
        for _ in range(3):
            assert run(listed), "the emulator lists its models"
        gc.collect()  # an unclosed session says so when it is collected
    assert not [w for w in warned if "Unclosed client session" in str(w.message)]
    assert not [key for key in clients._clients if key[1] == config], "closed and forgotten"
