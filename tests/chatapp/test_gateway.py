"""Gateway selection and what each dialect's cost reporting becomes on record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatapp import gateway, worker
from chatapp.models import Generation
from chatapp.presentation import error_text

from .conftest import start_turn

pytestmark = [pytest.mark.django_db(transaction=True)]


async def run(user: Any, model: str, base_url: str) -> Generation:
    turn = await start_turn(user, "hello there", model)
    config = gateway.GatewayConfig(base_url, "test-key", emulated=False)
    await asyncio.wait_for(worker.start(turn.job, config=config), 30)
    return await Generation.objects.select_related("message").aget(pk=turn.generation.pk)


async def test_without_llm_base_url_the_built_in_emulator_serves(settings: Any) -> None:
    settings.LLM_BASE_URL = None
    config = gateway.gateway_config()
    assert config.emulated
    assert config.base_url.endswith("/numes/api/v1")
    assert config.base_url.startswith("http://127.0.0.1:")
    gateway._models_cache.clear()
    models, error = await gateway.list_models()
    assert error is None
    assert "emulator/chat" in models


async def test_an_unreachable_gateway_is_reported_not_raised(settings: Any) -> None:
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    models, error = await gateway.list_models()
    assert models == []
    assert error is not None
    assert error.startswith("Could not load the model list")


async def test_tiny_has_no_usage_chunk_and_no_record(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/chat", f"{emulator_url}/tiny/v1")
    assert generation.status == "completed"
    assert generation.cost is None
    assert generation.cost_source == Generation.CostSource.NONE


async def test_osmexo_estimated_usage_is_marked_estimate(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/long", f"{emulator_url}/osmexo/v1")
    assert generation.status == "completed"
    assert generation.cost is not None
    assert generation.cost_unit == "micro_usd"
    assert generation.cost_source == Generation.CostSource.ESTIMATE


async def test_rate_limit_says_when_to_retry(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/error-before", f"{emulator_url}/nodul/api/v1")
    assert generation.status == "failed"
    assert generation.error_status == 429
    assert generation.retry_after is not None
    text = error_text(generation)
    assert text.startswith("The gateway refused the request (HTTP 429")
    assert text.endswith(f"Retry after {generation.retry_after:g} s.")


async def test_tiny_in_band_stall_keeps_partial(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/stall", f"{emulator_url}/tiny/v1")
    assert generation.status == "failed"
    assert generation.message.content
    assert generation.error_code
