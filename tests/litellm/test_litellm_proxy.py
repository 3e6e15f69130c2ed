"""The app against a real LiteLLM proxy (issue #23): each test sends a message through the app's
worker to LiteLLM, which calls the emulator, and checks what the app recorded against what
LiteLLM sent it (read back from the recording proxy between them) and what the emulator got."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatapp.assistants.models import ChatDefaults
from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import catalog, configs, detected, key_vault
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways.units import default_unit
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from tests.chatapp.conftest import GroupListener

from .conftest import MASTER_KEY, PRICES, Proxy, RecordingProxy, Upstream
from .http_log import Exchange

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # One proxy for the module: in one xdist worker, not started in each.
    pytest.mark.xdist_group("litellm"),
]


LEDGER_PLACES = Decimal(1).scaleb(-Generation._meta.get_field("cost").decimal_places)


class Turn:
    """One message sent through the app's worker to `gateway`."""

    def __init__(self, user: Any, gateway: Gateway, text: str, model: str) -> None:
        self.user, self.gateway, self.text, self.model = user, gateway, text, model

    async def start(self) -> GroupListener:
        config = await configs.aconfig_for(self.gateway.pk)
        # As a send does: the model is checked against the gateway's list (which keeps its prices).
        await catalog.listed_models(config, self.model)
        owner = await worker.owner_channel()
        self.started = await sync_to_async(create_turn)(
            self.user,
            TurnRequest(text=self.text, answerer=Answerer(model=self.model, gateway=config)),
            owner,
        )
        listener = await GroupListener(self.started.conversation.pk).join()
        self.task = worker.start(self.started.job)
        return listener

    async def stop(self) -> None:
        job = self.started.job
        await get_channel_layer().send(job.owner_channel, socket_messages.cancel(job.generation_pk))

    async def generation(self) -> Generation:
        await asyncio.wait_for(self.task, 60)
        return await Generation.objects.select_related("message").aget(
            pk=self.started.generation.pk
        )

    async def run(self, within: float = 30.0) -> tuple[Generation, dict[str, Any], float]:
        """The finished generation, the `done` message and when it arrived."""
        listener = await self.start()
        done = await listener.until("done", within=within)
        done_at = time.time()
        return await self.generation(), done, done_at


def chat_exchanges(recorder: RecordingProxy, text: str) -> list[Exchange]:
    """What the app asked LiteLLM for `text`, and LiteLLM's replies."""
    return [
        exchange
        for exchange in recorder.exchanges()
        if exchange.path == "/v1/chat/completions"
        and exchange.request_json()["messages"][-1]["content"] == text
    ]


def usage_chunk(exchange: Exchange) -> dict[str, Any]:
    """The stream's usage, its amounts read as exact decimals (as LiteLLM wrote them)."""
    (usage,) = [chunk["usage"] for chunk in exchange.sse_data() if chunk.get("usage")]
    return dict(usage)


async def test_a_completed_answer_costs_what_litellm_reported_in_dollars(
    alice: Any, litellm_gateway: Gateway, recorder: RecordingProxy
) -> None:
    text = "Tell me about otters, and what it costs"
    generation, done, _ = await Turn(alice, litellm_gateway, text, "emulator/chat").run()
    assert done["status"] == "completed"
    (exchange,) = chat_exchanges(recorder, text)
    assert exchange.request_json()["stream_options"] == {"include_usage": True}
    usage = usage_chunk(exchange)
    assert usage["cost"] > 0, "LiteLLM priced the answer"
    assert generation.cost_source == Generation.CostSource.STREAM
    # LiteLLM writes its float sum as is (0.0017959999999999999 for 0.001796): equal to the
    # ledger's 15 decimal places.
    assert generation.cost == usage["cost"].quantize(LEDGER_PLACES)
    assert generation.cost_unit == "usd"
    assert (generation.prompt_tokens, generation.completion_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )


async def test_a_failing_message_makes_at_most_three_upstream_requests(
    alice: Any, litellm_gateway: Gateway, litellm_upstream: Upstream, recorder: RecordingProxy
) -> None:
    """LiteLLM retries a 503 itself (1 + NUM_RETRIES attempts): the app must not multiply them,
    and the user hears of the failure soon after LiteLLM gives up."""
    text = "This one fails upstream"
    generation, done, done_at = await Turn(
        alice, litellm_gateway, text, "emulator/error-before"
    ).run(within=60)
    assert done["status"] == "failed"
    attempts = litellm_upstream.asked(text)
    assert 1 <= len(attempts) <= 3, f"{len(attempts)} upstream requests for one message"
    final = chat_exchanges(recorder, text)[-1]
    assert final.status == 503
    assert done_at - final.ended_at <= 5.0, "the error reached the user within 5 s"
    assert generation.status == "failed"
    assert generation.error_status == 503


async def test_the_request_id_is_litellms_call_id(
    alice: Any, litellm_gateway: Gateway, recorder: RecordingProxy
) -> None:
    text = "Which call was this?"
    generation, _, _ = await Turn(alice, litellm_gateway, text, "emulator/echo").run()
    (exchange,) = chat_exchanges(recorder, text)
    call_id = exchange.headers["x-litellm-call-id"]
    assert call_id
    assert generation.request_id == call_id
    assert generation.served_model == exchange.headers["x-litellm-model-name"]


async def test_the_conversations_reasoning_effort_reaches_the_upstream(
    alice: Any, litellm_gateway: Gateway, litellm_upstream: Upstream
) -> None:
    await ChatDefaults.objects.acreate(user=alice, reasoning_effort="high")
    text = "Why is the sky blue? Think hard."
    generation, _, _ = await Turn(alice, litellm_gateway, text, "emulator/reasoning").run()
    assert generation.status == "completed"
    (request,) = litellm_upstream.asked(text)
    assert request.body.get("reasoning_effort") == "high"
    assert generation.message is not None
    assert generation.message.reasoning, "LiteLLM's reasoning_content is the thinking"


async def test_a_stopped_answer_is_estimated_at_litellms_listed_prices(
    alice: Any, litellm_gateway: Gateway
) -> None:
    turn = Turn(alice, litellm_gateway, "Write at length about otters", "emulator/long")
    listener = await turn.start()
    await listener.until("delta")
    await turn.stop()
    done = await listener.until("done", within=10)
    assert done["status"] == "cancelled"
    generation = await turn.generation()
    assert generation.message is not None
    assert generation.message.content, "part of the answer arrived"
    assert generation.cost_source == Generation.CostSource.ESTIMATE, generation.cost_note
    price = await ModelPrice.objects.aget(gateway=litellm_gateway, model="emulator/long")
    assert price.source == ModelPrice.Source.GATEWAY, "the price is LiteLLM's /model/info"
    assert (price.prompt, price.completion) == (
        Decimal(str(PRICES["input_cost_per_token"])),
        Decimal(str(PRICES["output_cost_per_token"])),
    )
    assert generation.cost is not None
    assert generation.cost > 0
    assert generation.cost_unit == "usd"
    assert "listed price" in generation.cost_note


async def test_a_gateway_of_blank_dialect_is_found_to_be_litellm(
    recorder: RecordingProxy,
) -> None:
    """Detection as the README describes it, and the unit following it. Neither the URL (loopback,
    a port) nor LiteLLM's `/v1/models` headers (it sends no `x-litellm-*` there) name it."""
    row = await Gateway.objects.acreate(
        name="LiteLLM, undeclared",
        base_url=f"{recorder.url}/v1",
        cost_unit=default_unit(None),
        api_key_encrypted=await sync_to_async(key_vault.encrypt)(MASTER_KEY),
    )
    configs.forget_configs()
    await detected.ensure_detected(await configs.aconfig_for(row.pk))
    await row.arefresh_from_db()
    assert row.detected_dialect == "litellm", row.detection_note
    assert row.cost_unit == "usd"


def test_model_info_lists_the_configured_prices(litellm_proxy: Proxy) -> None:
    """What the app reads its listed prices from: LiteLLM's own answer (not the app's)."""
    reply = litellm_proxy.get("/model/info")
    assert reply.status_code == 200
    info = {entry["model_name"]: entry["model_info"] for entry in reply.json()["data"]}
    assert info["emulator/long"]["input_cost_per_token"] == PRICES["input_cost_per_token"]
    assert info["emulator/long"]["output_cost_per_token"] == PRICES["output_cost_per_token"]
