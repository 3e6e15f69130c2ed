"""A gateway whose admin left its dialect blank is asked which it is, over real HTTP, once its
models are listed: what it is then decides its cost unit, and the admin says what was found."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatapp.gateways import catalog, configs, detected, key_vault
from chatapp.gateways.models import Gateway
from tests.gateway_client.rawserver import Peer, raw_server

pytestmark = [pytest.mark.django_db(transaction=True)]

MODELS = json.dumps({"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model"}]})


def litellm_like(peer: Peer) -> Any:
    async def answer() -> None:
        if peer.request_head.startswith(b"GET /v1/models "):
            await peer.head("200 OK", "application/json", "x-litellm-version: 1.80.0\r\n")
            await peer.chunk(MODELS.encode())
        else:
            await peer.head("404 Not Found", "application/json")
        await peer.end()

    return answer()


def unknown(peer: Peer) -> Any:
    async def answer() -> None:
        found = peer.request_head.startswith(b"GET /v1/models ")
        await peer.head("200 OK" if found else "404 Not Found", "application/json")
        await peer.chunk(MODELS.encode() if found else b"{}")
        await peer.end()

    return answer()


async def blank_gateway(base_url: str, unit: str = "credits") -> Gateway:
    detected._asked.clear()
    row = await Gateway.objects.acreate(
        name="Proxy",
        base_url=base_url,
        dialect="",
        cost_unit=unit,
        api_key_encrypted=key_vault.encrypt("sk-proxy"),
    )
    configs.forget_configs()
    return row


async def test_a_litellm_proxy_is_detected_and_bills_in_dollars() -> None:
    async with raw_server(litellm_like) as (base_url, _):
        row = await blank_gateway(base_url)
        models, error = await catalog.list_models(await configs.aconfig_for(row.pk))
    assert error is None
    assert [info.id for info in models] == ["gpt-4o-mini"]
    await row.arefresh_from_db()
    assert (row.dialect, row.detected_dialect, row.cost_unit) == ("", "litellm", "usd")
    assert row.detection_note == "x-litellm-version: 1.80.0 on its /models answer"
    assert (await configs.aconfig_for(row.pk)).dialect == "litellm"


async def test_a_unit_an_admin_chose_stands_when_the_dialect_is_detected() -> None:
    async with raw_server(litellm_like) as (base_url, _):
        row = await blank_gateway(base_url, unit="sat")
        await catalog.list_models(await configs.aconfig_for(row.pk))
    await row.arefresh_from_db()
    assert (row.detected_dialect, row.cost_unit) == ("litellm", "sat")


async def test_a_gateway_that_tells_nothing_stays_unknown_and_is_asked_once() -> None:
    async with raw_server(unknown) as (base_url, peers):
        row = await blank_gateway(base_url)
        config = await configs.aconfig_for(row.pk)
        await catalog.list_models(config)
        asked = len(peers)
        catalog._models_cache.clear()
        await catalog.list_models(config)
    await row.arefresh_from_db()
    assert (row.detected_dialect, row.cost_unit) == ("", "credits")
    assert row.detection_note == "it answered none of the known gateways' probes"
    assert len(peers) == asked + 1, "the second listing asks /models only"


async def test_a_dialect_set_by_hand_is_never_probed() -> None:
    async with raw_server(litellm_like) as (base_url, peers):
        row = await blank_gateway(base_url)
        await Gateway.objects.filter(pk=row.pk).aupdate(dialect="vllm")
        configs.forget_configs()
        await catalog.list_models(await configs.aconfig_for(row.pk))
    await row.arefresh_from_db()
    assert row.detection_note == ""
    assert [peer.request_head.split(b" ")[1] for peer in peers] == [b"/v1/models"]


def test_the_admins_dialect_picker_says_what_was_detected(admin_client: Any) -> None:
    note = "x-litellm-version: 1.80.0 on its /models answer"
    row = Gateway.objects.create(
        name="Proxy", base_url="http://127.0.0.1:4000/v1", dialect="", cost_unit="usd",
        detected_dialect="litellm", detection_note=note,
    )  # fmt: skip
    page = admin_client.get(f"/admin/chatapp/gateway/{row.pk}/change/").content.decode()
    assert (
        "auto-detect (detected: LiteLLM (x-litellm-version: 1.80.0 on its /models answer))" in page
    )
    listing = admin_client.get("/admin/chatapp/gateway/").content.decode()
    assert "LiteLLM (detected)" in listing


def test_a_new_base_url_in_the_admin_is_asked_again(admin_client: Any) -> None:
    row = Gateway.objects.create(
        name="Proxy", base_url="http://127.0.0.1:4000/v1", dialect="", cost_unit="usd",
        detected_dialect="litellm", detection_note="x-litellm-version: 1.80.0",
    )  # fmt: skip
    form = {"name": "Proxy", "base_url": "http://127.0.0.1:11434/v1", "dialect": "",
            "cost_unit": "usd", "enabled": "on", "api_key_env": "", "speech_model": "",
            "speech_voice": ""}  # fmt: skip
    answer = admin_client.post(f"/admin/chatapp/gateway/{row.pk}/change/", form)
    assert answer.status_code == 302
    row.refresh_from_db()
    assert (row.detected_dialect, row.detection_note) == ("", "")


async def test_a_gateway_saved_again_is_asked_again() -> None:
    """Asked lately and told nothing; an admin then saves the row (a new key, a new setup):
    the next listing asks again instead of waiting out `RETRY_AFTER`."""
    async with raw_server(unknown) as (base_url, peers):
        row = await blank_gateway(base_url)
        await catalog.list_models(await configs.aconfig_for(row.pk))
        asked = len(peers)
        await row.asave()
        catalog._models_cache.clear()
        await catalog.list_models(await configs.aconfig_for(row.pk))
    assert len(peers) == 2 * asked, "the probes again, with /models"
