"""`manage.py reconcile_costs` against the emulator's generation records."""

from __future__ import annotations

import asyncio
import io
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways import configs, key_vault
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import exact
from gateway_client import GatewayClient
from gateway_client.emulator import EmulatorURL

pytestmark = [pytest.mark.django_db(transaction=True)]

MATCH = "The running totals match the ledger.\n"  # the check after settling (`totals_check`)


@pytest.fixture(autouse=True)
def quick_records(settings: Any) -> None:
    settings.CHAT_RECORD_FIRST_WAIT = 0.01  # six asks in ~0.6 s instead of ~8 s


def streamed_id(emulator_url: EmulatorURL, model: str = "emulator/chat") -> str:
    """A real Numes generation on the emulator, read to the end; its generation ID."""

    async def stream() -> str:
        async with GatewayClient(f"{emulator_url}/numes/api/v1", "k") as gw:
            messages = [{"role": "user", "content": "hello"}]
            async with gw.stream_chat(model=model, messages=messages) as events:
                async for _ in events:
                    pass
                assert events.completion.generation_id
                return events.completion.generation_id

    return asyncio.run(stream())


def pending(user: Any, upstream_id: str, gateway_pk: int | None = None) -> Generation:
    conversation = Conversation.objects.create(user=user, title="t")
    message = Message.objects.create(conversation=conversation, role="assistant", content="Hi")
    if gateway_pk is None:
        gateway_pk = configs.config_for(None).pk
    return Generation.objects.create(
        message=message,
        conversation=conversation,
        gateway_id=gateway_pk,
        model="emulator/chat",
        dialect="numes",
        status="cancelled",
        upstream_id=upstream_id,
        cost_source="pending",
    )


def reconcile(*args: str) -> str:
    out = io.StringIO()
    call_command("reconcile_costs", *args, stdout=out)
    return out.getvalue()


def test_pending_costs_come_from_the_records_and_a_second_run_changes_nothing(
    alice: Any, emulator_url: EmulatorURL
) -> None:
    upstream_id = streamed_id(emulator_url)
    record = emulator_url.app.records.wait_settled(upstream_id)
    generation = pending(alice, upstream_id)
    out = reconcile()
    row = Generation.objects.get(pk=generation.pk)
    assert row.cost_source == "record"
    assert row.cost == exact(record.to_api()["data"]["total_cost"])
    assert row.cost_unit == "usd"
    assert f"generation {row.pk} ({upstream_id}): generation record: $" in out
    assert out.endswith("Settled 1 of 1 pending cost(s).\n" + MATCH)
    assert reconcile().endswith("Settled 0 of 0 pending cost(s).\n" + MATCH)
    assert Generation.objects.get(pk=generation.pk).cost == row.cost


def test_a_dry_run_says_what_would_change_and_writes_nothing(
    alice: Any, emulator_url: EmulatorURL
) -> None:
    upstream_id = streamed_id(emulator_url)
    emulator_url.app.records.wait_settled(upstream_id)
    generation = pending(alice, upstream_id)
    out = reconcile("--dry-run")
    assert "generation record: $" in out
    assert out.endswith("Would settle 1 of 1 pending cost(s).\n" + MATCH)
    row = Generation.objects.get(pk=generation.pk)
    assert (row.cost_source, row.cost, row.reconcile_attempts) == ("pending", None, 0)


def test_a_gateway_that_is_down_leaves_the_cost_pending_and_a_later_run_completes_it(
    alice: Any, emulator_url: EmulatorURL
) -> None:
    upstream_id = streamed_id(emulator_url)
    emulator_url.app.records.wait_settled(upstream_id)
    down = Gateway.objects.create(
        name="Numes (down)",
        base_url="http://127.0.0.1:9/api/v1",
        dialect="numes",
        cost_unit="sat",
        api_key_encrypted=key_vault.encrypt("k"),
    )
    generation = pending(alice, upstream_id, down.pk)
    for _ in range(5):
        assert "could not be reached; left pending" in reconcile()
    row = Generation.objects.get(pk=generation.pk)
    assert (row.cost_source, row.reconcile_attempts) == ("pending", 0), "down rounds don't count"
    down.base_url = f"{emulator_url}/numes/api/v1"
    down.save()
    reconcile()
    row = Generation.objects.get(pk=generation.pk)
    assert row.cost_source == "record"
    assert row.cost_unit == "sat", "usage.cost is in the key's currency: the gateway's unit"


def test_not_found_is_asked_again_later(alice: Any, emulator_url: EmulatorURL) -> None:
    generation = pending(alice, "gen-not-written-yet")
    assert "no record yet; left pending" in reconcile()
    assert Generation.objects.get(pk=generation.pk).reconcile_attempts == 1
    upstream_id = streamed_id(emulator_url)  # the record appears (here: under its real ID)
    emulator_url.app.records.wait_settled(upstream_id)
    Generation.objects.filter(pk=generation.pk).update(upstream_id=upstream_id)
    reconcile()
    assert Generation.objects.get(pk=generation.pk).cost_source == "record"


def test_in_progress_then_final(alice: Any, emulator_url: EmulatorURL) -> None:
    records = emulator_url.app.records
    delay, records.finalize_delay_s = records.finalize_delay_s, 5.0
    try:
        upstream_id = streamed_id(emulator_url)
        generation = pending(alice, upstream_id)
        assert "no record yet; left pending" in reconcile(), "in_progress is not final"
        assert Generation.objects.get(pk=generation.pk).cost_source == "pending"
    finally:
        records.finalize_delay_s = delay
    record = records.get(upstream_id)
    assert record is not None
    record.settles_at = 0.0  # the finalisation window is over
    reconcile()
    row = Generation.objects.get(pk=generation.pk)
    assert row.cost_source == "record"
    assert row.cost == exact(record.to_api()["data"]["total_cost"])
    assert row.cost > Decimal(0)


def test_since_limits_the_run(alice: Any) -> None:
    generation = pending(alice, "gen-old")
    Generation.objects.filter(pk=generation.pk).update(started_at="2020-01-01T00:00:00Z")
    assert reconcile("--since", "7d").endswith("Settled 0 of 0 pending cost(s).\n" + MATCH)
    assert reconcile("--since", "2019-12-31").endswith("of 1 pending cost(s).\n" + MATCH)
