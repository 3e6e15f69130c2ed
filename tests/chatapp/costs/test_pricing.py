"""Prices a gateway serves, kept for estimates (`chatapp.gateways.pricing`): LiteLLM's
`/model/info` prices are stored as the gateway's, never over an admin's, and a stopped answer
through LiteLLM is estimated at them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import catalog, configs, key_vault, pricing
from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.model_list import parse_model_info, parse_models, with_details
from tests.chatapp.conftest import GroupListener
from tests.gateway_client.rawserver import Peer, raw_server

pytestmark = [pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gateways" / "litellm"
CLOSE = "Connection: close\r\n"


def _chunk(content: str) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": content}}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


async def _litellm(peer: Peer) -> None:
    """A LiteLLM as far as these tests ask: its captured lists, and a chat stream that goes on
    until the client leaves."""
    path = peer.request_head.split(b" ", 2)[1]
    if path in (b"/v1/models", b"/model/info"):
        name = "models.json" if path == b"/v1/models" else "model_info.json"
        await peer.head(content_type="application/json", extra=CLOSE)
        await peer.chunk((FIXTURES / name).read_bytes())
        await peer.end()
        return
    await peer.head(extra=CLOSE)
    for _ in range(400):  # 20 s at most: the test stops it after the first words
        await peer.chunk(_chunk("Otters hold hands while they sleep. "))
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def litellm_gateway() -> AsyncIterator[GatewayConfig]:
    async with raw_server(_litellm) as (url, _):
        row = await Gateway.objects.acreate(
            name="LiteLLM",
            base_url=url,
            dialect="litellm",
            cost_unit="usd",
            api_key_encrypted=await sync_to_async(key_vault.encrypt)("sk-test"),
        )
        configs.forget_configs()
        yield await configs.aconfig_for(row.pk)


def _prices(gateway_pk: int) -> dict[str, tuple[Decimal, Decimal, str]]:
    return {
        price.model: (price.prompt, price.completion, price.source)
        for price in ModelPrice.objects.filter(gateway_id=gateway_pk)
    }


async def test_litellm_model_info_prices_are_kept_as_the_gateways() -> None:
    async with litellm_gateway() as config:
        _, error = await catalog.list_models(config)
    assert error is None
    assert await sync_to_async(_prices)(config.pk) == {
        "gpt-4o": (Decimal("0.0000025"), Decimal("0.00001"), "gateway"),
        "claude-sonnet": (Decimal("0.000003"), Decimal("0.000015"), "gateway"),
        "text-embedding-3-small": (Decimal("0.00000002"), Decimal("0"), "gateway"),
    }


async def test_an_admins_price_is_never_overwritten_by_model_info() -> None:
    async with litellm_gateway() as config:
        await ModelPrice.objects.acreate(
            gateway_id=config.pk, model="gpt-4o", prompt=Decimal("1"), completion=Decimal("2")
        )
        listed = with_details(
            parse_models((FIXTURES / "models.json").read_bytes()),
            parse_model_info((FIXTURES / "model_info.json").read_bytes()),
        )
        await pricing.remember_listed(config, listed)
    prices = await sync_to_async(_prices)(config.pk)
    assert prices["gpt-4o"] == (Decimal("1"), Decimal("2"), "admin")
    assert prices["claude-sonnet"][2] == "gateway"


async def test_a_stopped_answer_through_litellm_is_estimated_at_its_model_info_price(
    alice: Any,
) -> None:
    async with litellm_gateway() as config:
        await catalog.list_models(config)  # learns the prices, as the picker's page does
        owner = await worker.owner_channel()
        started = await sync_to_async(create_turn)(
            alice,
            TurnRequest(text="otters", answerer=Answerer(model="gpt-4o", gateway=config)),
            owner,
        )
        listener = await GroupListener(started.conversation.pk).join()
        task = worker.start(started.job)
        await listener.until("delta")
        await get_channel_layer().send(owner, socket_messages.cancel(started.job.generation_pk))
        await asyncio.wait_for(task, 30)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.status == "cancelled"
    assert generation.dialect == "litellm"
    assert generation.message.content.startswith("Otters")
    assert generation.cost_source == "estimate", generation.cost_note
    assert generation.cost_unit == "usd"
    assert generation.cost is not None
    assert generation.cost > 0
    assert generation.cost_note.startswith("estimated: ")
    assert "at the listed price for gpt-4o" in generation.cost_note
