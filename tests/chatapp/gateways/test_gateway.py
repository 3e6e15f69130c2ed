"""Gateway selection and what each dialect's cost reporting becomes on record."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import AsyncClient
from django.urls import reverse

from chatapp import shared_cache
from chatapp.conversations.models import Conversation
from chatapp.conversations.presentation import error_text
from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import catalog, configs, key_vault
from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways.units import default_unit
from chatapp.messaging import socket_messages
from chatapp.shared_cache.models import SharedVersion
from chatapp.streaming import worker
from gateway_client import ModelInfo
from tests.chatapp.conftest import GroupListener

pytestmark = [pytest.mark.django_db(transaction=True)]


async def gateway_at(base_url: str, dialect: str = "", unit: str = "credits") -> GatewayConfig:
    row = await Gateway.objects.acreate(
        name=base_url,
        base_url=base_url,
        dialect=dialect,
        cost_unit=unit,
        api_key_encrypted=key_vault.encrypt("test-key"),
    )
    configs.forget_configs()
    return await configs.aconfig_for(row.pk)


async def run(user: Any, model: str, base_url: str, dialect: str = "") -> Generation:
    config = await gateway_at(base_url, dialect)
    owner = await worker.owner_channel()
    started = await sync_to_async(create_turn)(
        user, TurnRequest(text="hello there", answerer=Answerer(model=model, gateway=config)), owner
    )
    await asyncio.wait_for(worker.start(started.job), 30)
    return await Generation.objects.select_related("message").aget(pk=started.generation.pk)


async def test_without_llm_base_url_the_built_in_emulator_serves(settings: Any) -> None:
    settings.LLM_BASE_URL = None
    config = await configs.aconfig_for(None)
    assert config.emulated
    assert config.name == configs.EMULATOR_NAME
    assert config.base_url.endswith("/numes/api/v1")
    assert config.base_url.startswith("http://127.0.0.1:")
    group, *_ = await catalog.catalog()
    assert group.config.pk == config.pk
    assert group.error is None
    chat = next(choice for choice in group.choices if choice.model == "emulator/chat")
    assert chat.value == f"g{config.pk}:emulator/chat"
    assert chat.label == "Emulator: chat"
    assert chat.hint, "the scenario's description is the option's hint"


async def test_llm_base_url_creates_then_updates_the_default_gateway(
    settings: Any, emulator_url: str
) -> None:
    first = await configs.aconfig_for(None)
    assert (first.name, first.base_url, first.api_key) == (
        configs.DEFAULT_NAME,
        f"{emulator_url}/numes/api/v1",
        "test-key",
    )
    settings.LLM_API_KEY = "rotated-key"
    settings.LLM_COST_UNIT = "sat"
    second = await configs.aconfig_for(None)
    assert second.pk == first.pk
    assert (second.api_key, second.cost_unit) == ("rotated-key", "sat")
    row = await Gateway.objects.aget(pk=first.pk)
    assert "rotated-key" not in row.api_key_encrypted, "stored encrypted"
    assert key_vault.decrypt(row.api_key_encrypted) == "rotated-key"
    assert "rotated-key" not in repr(second), "a config never prints its key"


async def test_a_new_llm_base_url_without_a_key_drops_the_old_urls_key(
    settings: Any, emulator_url: str
) -> None:
    first = await configs.aconfig_for(None)
    assert first.api_key == "test-key"
    settings.LLM_BASE_URL = f"{emulator_url}/osmexo/v1"
    settings.LLM_API_KEY = ""
    configs.forget_configs()
    await sync_to_async(configs._ensure_default)()
    row = await Gateway.objects.aget(pk=first.pk)
    assert (row.base_url, row.api_key_encrypted) == (settings.LLM_BASE_URL, "")
    with pytest.raises(key_vault.KeyUnavailable, match="no API key is configured"):
        configs.resolve(row)


async def test_llm_speech_model_sets_the_default_gateways_or_leaves_the_admins(
    settings: Any, emulator_url: str
) -> None:
    config = await configs.aconfig_for(None)
    await Gateway.objects.filter(pk=config.pk).aupdate(speech_model="set-by-an-admin")
    configs.forget_configs()
    assert (await configs.aconfig_for(None)).speech_model == "set-by-an-admin"
    settings.LLM_SPEECH_MODEL = "emulator/audio"
    assert (await configs.aconfig_for(None)).speech_model == "emulator/audio"


async def test_a_gateway_that_is_down_is_a_group_with_its_reason(emulator_url: str) -> None:
    down = await gateway_at("http://127.0.0.1:9/v1")
    groups = await catalog.catalog()
    assert [g.config.name for g in groups] == [configs.DEFAULT_NAME, down.name]
    assert groups[0].error is None, "the others still work"
    assert groups[0].choices
    assert groups[1].choices == []
    assert groups[1].error is not None
    assert groups[1].error.startswith("Could not load the model list")


async def test_a_fresh_install_shows_the_emulators_four_dialects_side_by_side(
    settings: Any,
) -> None:
    """With no gateway configured, an empty database (a fresh `make run`) lists all four, offline;
    one an admin deletes later stays deleted."""
    settings.LLM_BASE_URL = None
    groups = await catalog.catalog()
    assert [(g.config.name, g.config.dialect, g.config.emulated) for g in groups] == [
        (configs.EMULATOR_NAME, "numes", True),
        ("Emulator (Nodul)", "nodul", True),
        ("Emulator (Osmexo)", "osmexo", True),
        ("Emulator (tiny-3b)", "tiny", True),
    ]
    assert all(g.error is None and g.choices for g in groups)
    await Gateway.objects.filter(name="Emulator (Nodul)").adelete()
    configs.forget_configs()
    assert [g.config.dialect for g in await catalog.catalog()] == ["numes", "osmexo", "tiny"]


async def test_the_emulators_four_dialects_are_four_gateways(settings: Any) -> None:
    settings.LLM_BASE_URL = None
    rows = await sync_to_async(configs.add_emulator_gateways)()
    again = await sync_to_async(configs.add_emulator_gateways)()
    assert [r.pk for r in again] == [r.pk for r in rows], "idempotent"
    groups = await catalog.catalog()
    assert [(g.config.dialect, g.config.cost_unit) for g in groups] == [
        ("numes", "usd"),
        ("nodul", "pnp"),
        ("osmexo", "micro_usd"),
        ("tiny", "credits"),
    ]
    assert all(g.error is None and g.choices for g in groups)


def test_picker_values_name_the_gateway_and_keep_colons_in_model_ids() -> None:
    assert catalog.parse_choice(catalog.choice_value(3, "openai/gpt:free")) == (
        3,
        "openai/gpt:free",
    )
    assert catalog.parse_choice("emulator/echo") == (None, "emulator/echo")
    assert catalog.parse_choice("gpt-4:latest") == (None, "gpt-4:latest")


async def test_tiny_has_no_usage_and_without_a_price_says_so(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/chat", f"{emulator_url}/tiny/v1", "tiny")
    assert generation.status == "completed"
    assert generation.cost is None
    assert generation.cost_source == Generation.CostSource.UNAVAILABLE
    assert generation.cost_note == (
        "tiny-3b streams report no usage and no price is configured for emulator/chat"
    )


async def test_tiny_with_a_price_is_estimated_from_the_text(alice: Any, emulator_url: str) -> None:
    config = await gateway_at(f"{emulator_url}/tiny/v1", "tiny")
    await ModelPrice.objects.acreate(
        gateway_id=config.pk, model="emulator/chat", prompt="0.0000001", completion="0.0000002"
    )
    owner = await worker.owner_channel()
    started = await sync_to_async(create_turn)(
        alice,
        TurnRequest(text="hello there", answerer=Answerer(model="emulator/chat", gateway=config)),
        owner,
    )
    await asyncio.wait_for(worker.start(started.job), 30)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.cost_source == Generation.CostSource.ESTIMATE
    prompt = -(-len("hello there") // 4)
    completion = -(-len(generation.message.content) // 4)
    assert generation.cost == Decimal(prompt) * Decimal("0.0000001") + Decimal(
        completion
    ) * Decimal("0.0000002")
    assert generation.cost_unit == "credits"
    assert generation.cost_note.startswith(
        f"estimated: {prompt} prompt + {completion} completion tokens counted from the text"
    )


async def test_osmexo_estimated_usage_is_marked_estimate(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/long", f"{emulator_url}/osmexo/v1", "osmexo")
    assert generation.status == "completed"
    assert generation.cost is not None
    assert generation.cost_unit == "micro_usd"
    assert generation.cost_source == Generation.CostSource.ESTIMATE
    assert generation.cost_note.startswith("estimated by the gateway")


async def test_rate_limit_says_when_to_retry(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/error-before", f"{emulator_url}/nodul/api/v1", "nodul")
    assert generation.status == "failed"
    assert generation.error_status == 429
    assert generation.retry_after is not None
    text = error_text(generation)
    assert text.startswith("The gateway refused the request (HTTP 429")
    assert text.endswith(f"Retry after {generation.retry_after:g} s.")


async def test_tiny_in_band_stall_keeps_partial(alice: Any, emulator_url: str) -> None:
    generation = await run(alice, "emulator/stall", f"{emulator_url}/tiny/v1", "tiny")
    assert generation.status == "failed"
    assert generation.message.content
    assert generation.error_code


async def test_keys_never_reach_a_log_or_a_page(
    alice: Any, caplog: Any, emulator_url: str, settings: Any
) -> None:
    secret = "sk-never-shown-4242"
    settings.LLM_API_KEY = secret
    await Gateway.objects.acreate(
        name="Down",
        base_url="http://127.0.0.1:9/v1",
        cost_unit="usd",
        api_key_encrypted=key_vault.encrypt(secret),
    )
    caplog.set_level("DEBUG")
    groups = await catalog.catalog()
    assert any(group.error for group in groups)
    generation = await run(alice, "emulator/error-before", f"{emulator_url}/numes/api/v1")
    assert generation.status == "failed"
    assert secret not in caplog.text
    assert secret not in repr(groups)
    assert secret not in generation.error_message


async def cancelled_midway(user: Any, config: GatewayConfig) -> Generation:
    owner = await worker.owner_channel()
    model = "emulator/long?tokens_per_second=200"
    started = await sync_to_async(create_turn)(
        user, TurnRequest(text="otters", answerer=Answerer(model=model, gateway=config)), owner
    )
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("delta")
    await get_channel_layer().send(owner, socket_messages.cancel(started.job.generation_pk))
    await asyncio.wait_for(task, 30)
    return await Generation.objects.select_related("message").aget(pk=started.generation.pk)


@pytest.mark.parametrize(
    ("dialect", "path", "listed_price", "source", "unit"),
    [
        ("numes", "/numes/api/v1", True, "record", "usd"),  # the generation record
        ("nodul", "/nodul/api/v1", True, "estimate", "pnp"),  # no record: /models pricing
        ("osmexo", "/osmexo/v1", False, "unavailable", ""),  # no record, no price listed
        ("tiny", "/tiny/v1", False, "unavailable", ""),
    ],
)
async def test_a_cancelled_stream_on_each_dialect_has_a_cost_an_estimate_or_a_reason(
    alice: Any,
    emulator_url: str,
    dialect: str,
    path: str,
    listed_price: bool,
    source: str,
    unit: str,
) -> None:
    config = await gateway_at(f"{emulator_url}{path}", dialect, default_unit(dialect))
    _, error = await catalog.list_models(config)  # learns the prices a listing gives
    assert error is None
    assert await ModelPrice.objects.filter(gateway_id=config.pk).aexists() == listed_price
    generation = await cancelled_midway(alice, config)
    assert generation.status == "cancelled"
    assert generation.message.content
    assert generation.dialect == dialect
    assert generation.cost_source == source, generation.cost_note
    if source == "unavailable":
        assert generation.cost is None
        assert "no price is configured for emulator/long" in generation.cost_note
    else:
        assert generation.cost is not None
        assert generation.cost > 0
        assert generation.cost_unit == unit
    if source == "estimate":
        assert generation.cost_note.startswith("estimated: ")
        assert "at the listed price for emulator/long" in generation.cost_note


async def test_configs_are_refreshed_once_for_many_new_chats_at_once(monkeypatch: Any) -> None:
    loads = 0
    load = configs._load

    def counting_load() -> Any:
        nonlocal loads
        loads += 1
        return load()

    monkeypatch.setattr(configs, "_load", counting_load)
    first = await asyncio.gather(*(configs.aconfig_for(None) for _ in range(20)))
    assert loads == 1, "an empty cache is filled once for all"
    assert len({config.pk for config in first}) == 1
    # Past its TTL the cache is still served, at once, while one refresh runs.
    assert configs._configs is not None
    configs._configs = (configs._configs[0] - configs.CONFIGS_TTL - 1, *configs._configs[1:])
    stale = await asyncio.gather(*(configs.aconfig_for(None) for _ in range(20)))
    assert stale == first
    assert configs._refreshing is not None
    await configs._refreshing
    assert loads == 2


@pytest.mark.parametrize("emulated", [False, True])
async def test_only_an_emulator_reads_options_from_a_model_name(
    settings: Any, emulated: bool
) -> None:
    settings.CHAT_EMULATOR_REQUEST_OPTIONS = True
    config = GatewayConfig(1, "Real", "https://gw.example/v1", "k", None, "credits", emulated)
    listed = [ModelInfo("gpt-4"), ModelInfo("emulator/long")]
    catalog._models_cache[config] = (time.monotonic(), listed)
    assert await catalog.listed_models(config, "emulator/long?long_tokens=5") == listed
    if emulated:
        assert await catalog.listed_models(config, "gpt-4?x") == listed
    else:
        with pytest.raises(catalog.ModelUnavailable, match="does not offer the model 'gpt-4\\?x'"):
            await catalog.listed_models(config, "gpt-4?x")


async def test_a_gateway_row_that_cannot_be_resolved_is_shown_broken_and_the_others_work(
    settings: Any, alice: Any
) -> None:
    """An absolute URL on the emulator's row (whose URL is a path under the emulator) made `/`,
    every conversation and every send 500."""
    settings.LLM_BASE_URL = None
    emulator, *_ = await sync_to_async(configs.add_emulator_gateways)()
    emulator.base_url = "https://api.example.com/v1"
    await emulator.asave()
    configs.forget_configs()
    client = AsyncClient()
    await client.aforce_login(alice)

    home = await client.get(reverse("chat:home"))
    assert home.status_code == 200
    why = f"{emulator.name}: Not usable: {configs.EMULATED_PATH}."
    assert why in home.content.decode()
    groups = await catalog.catalog()
    assert [group.error for group in groups[:3]] == [None] * 3
    assert groups[3].config.pk == emulator.pk
    sent = await client.post(
        reverse("chat:send_new"),
        {"content": "hello", "model": groups[0].choices[0].value},
        headers={"HX-Request": "true"},
    )
    assert sent.status_code == 200, sent.content.decode()[:3000]
    assert "composer-error" not in sent.headers.get("HX-Retarget", ""), sent.content.decode()
    conversation = await Conversation.objects.aget(user=alice)
    page = await client.get(reverse("chat:conversation", args=[conversation.pk]))
    assert page.status_code == 200
    refused = await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "again", "model": catalog.choice_value(emulator.pk, "emulator/ok")},
        headers={"HX-Request": "true"},
    )
    assert refused.status_code == 200
    assert "That gateway is not available" in refused.content.decode()


def test_the_admin_says_which_rows_cannot_be_used_and_refuses_a_whole_url_for_the_emulator(
    settings: Any, admin_client: Any
) -> None:
    settings.LLM_BASE_URL = None
    emulator, *_ = configs.add_emulator_gateways()
    Gateway.objects.filter(pk=emulator.pk).update(base_url="https://api.example.com/v1")

    listed = admin_client.get(reverse("admin:chatapp_gateway_changelist")).content.decode()
    assert f"no: {configs.EMULATED_PATH}" in listed
    assert listed.count('<td class="field-usable">yes</td>') == 3

    change = reverse("admin:chatapp_gateway_change", args=[emulator.pk])
    form = {"name": emulator.name, "dialect": "numes", "cost_unit": "usd", "enabled": "on"}
    refused = admin_client.post(change, {**form, "base_url": "https://api.example.com/v1"})
    assert refused.status_code == 200
    assert "The base URL of an emulated gateway is a path under the emulator" in (
        refused.content.decode()
    )
    saved = admin_client.post(change, {**form, "base_url": "/numes/api/v1"})
    assert saved.status_code == 302


async def test_a_gateway_saved_by_another_process_is_in_the_next_picker_and_send() -> None:
    """Another process's save reaches this one through the `SharedVersion` token its signal
    writes (here: the row written with no signal, and the token written as that process's
    receiver does): the picker and a send on it see it at once, not `CONFIGS_TTL` later."""
    default_pk = (await configs.aconfigs())[1]
    await sync_to_async(Gateway.objects.bulk_create)(
        [Gateway(name="Elsewhere", base_url="https://elsewhere.example/v1", cost_unit="credits",
                 api_key_encrypted=key_vault.encrypt("test-key"))]
    )  # fmt: skip
    pk = (await Gateway.objects.aget(name="Elsewhere")).pk
    assert pk not in (await configs.aconfigs())[0], "no token yet: the cache stands"
    await sync_to_async(shared_cache.changed)()
    assert pk in (await configs.aconfigs(checked=True))[0]

    await Gateway.objects.filter(pk=pk).aupdate(enabled=False)
    await sync_to_async(shared_cache.changed)()
    assert (await configs.aconfig_for(None)).pk == default_pk
    assert pk not in (await configs.aconfigs(checked=True))[0]


async def test_a_send_on_a_gateway_not_known_here_checks_the_cache_first() -> None:
    await configs.aconfigs()
    await sync_to_async(Gateway.objects.bulk_create)(
        [Gateway(name="Elsewhere", base_url="https://elsewhere.example/v1", cost_unit="credits",
                 api_key_encrypted=key_vault.encrypt("test-key"))]
    )  # fmt: skip
    await sync_to_async(shared_cache.changed)()
    pk = (await Gateway.objects.aget(name="Elsewhere")).pk
    assert (await configs.aconfig_for(pk)).name == "Elsewhere"
    assert (await sync_to_async(configs.config_for)(pk)).name == "Elsewhere"


def test_a_gateway_saved_writes_a_new_shared_version(db: None) -> None:
    before = SharedVersion.current()
    Gateway.objects.create(name="Saved", base_url="https://saved.example/v1")
    assert SharedVersion.current() != before
