"""A gateway's `GET /models` is untrusted input, and so is the model a user posts.

A list that is no list (`[]`, `{"data": 5}`), JSON nested 100,000 deep or a 300 MB body makes
that gateway's group of the picker "unavailable" with the reason, and `/` and every conversation
page still answer 200 (they answered 500 for every user); the 300 MB body is read only up to the
cap. Entries with an `id` that is no string are skipped, not the whole list. And a turn with a
model the chosen gateway does not list is refused in words, with nothing sent upstream and
nothing in the ledger: not by send, retry, regenerate, edit or continue.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways import configs, key_vault
from chatapp.gateways.models import Gateway
from gateway_client.model_list import MAX_MODELS_BYTES

from .scripted_gateway import (
    CHAT_MODELS_ASKED,
    HUGE_MODELS_BYTES,
    HUGE_SENT,
    ScriptedGateway,
    hostile_models_url,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("closed_clients")]

HTMX = {"HX-Request": "true"}
# Each hostile `/models` answer, and the words its group is shown unavailable with.
REASONS = {
    "models-list": 'the model list is not {"data": [...]}: Expected `object`, got `array`',
    "models-data-5": 'the model list is not {"data": [...]}: Expected `array`, got `int`',
    "models-deep": "the model list is nested too deeply to read",
    "models-deep-entry": "the model list is nested too deeply to read",
    "models-huge": "the model list is larger than 4 MiB",
}


def _hostile_gateway(scripted: ScriptedGateway, name: str) -> Gateway:
    return Gateway.objects.create(
        name=f"Hostile {name}",
        base_url=hostile_models_url(scripted.base_url, name),
        dialect="numes",
        cost_unit="usd",
        api_key_encrypted=key_vault.encrypt("sk-hostile"),
    )


async def signed_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


def _group(page: str, name: str) -> str:
    """The picker's `<optgroup>` of the gateway `name`, tag and options."""
    found = re.search(rf'<optgroup label="{re.escape(name)}[^"]*"[^>]*>.*?</optgroup>', page, re.S)
    assert found is not None, f"no group {name!r} in the picker"
    return found[0]


@pytest.mark.parametrize("hostile", list(REASONS))
async def test_a_broken_model_list_shows_its_gateway_down_and_every_page_works(
    alice: Any, scripted_gateway: ScriptedGateway, hostile: str
) -> None:
    row = await sync_to_async(_hostile_gateway)(scripted_gateway, hostile)
    conversation = await Conversation.objects.acreate(user=alice, title="mine")
    client = await signed_in(alice)
    for url in (reverse("chat:home"), reverse("chat:conversation", args=[conversation.pk])):
        response = await client.get(url)
        assert response.status_code == 200, url
        page = html.unescape(response.content.decode())
        assert f"{row.name}: Could not load the model list: {REASONS[hostile]}" in page
        assert 'label="Hostile' in page
        assert "(unavailable)" in _group(page, row.name)
        # The other gateway still works.
        default = _group(page, configs.DEFAULT_NAME)
        assert 'value="g' in default
        assert ':ok"' in default


async def test_a_huge_model_list_is_read_only_up_to_the_cap(
    alice: Any, scripted_gateway: ScriptedGateway
) -> None:
    await sync_to_async(_hostile_gateway)(scripted_gateway, "models-huge")
    HUGE_SENT.clear()
    response = await (await signed_in(alice)).get(reverse("chat:home"))
    assert response.status_code == 200
    assert "larger than 4 MiB" in response.content.decode()
    (sent,) = HUGE_SENT
    # What the gateway could write: the cap, and what loopback's socket buffers hold besides.
    assert sent < MAX_MODELS_BYTES + 32 * 1024 * 1024 < HUGE_MODELS_BYTES


async def test_entries_without_a_string_id_are_skipped_not_the_list(
    alice: Any, scripted_gateway: ScriptedGateway
) -> None:
    row = await sync_to_async(_hostile_gateway)(scripted_gateway, "models-bad-ids")
    response = await (await signed_in(alice)).get(reverse("chat:home"))
    assert response.status_code == 200
    group = _group(response.content.decode(), row.name)
    assert re.findall(r'<option value="([^"]*)"', group) == [f"g{row.pk}:ok"]
    assert "unavailable" not in group


def _finished_answer(user: Any, model: str) -> tuple[int, int, int]:
    """A conversation of `user`'s with a question and an answer by `model` that ran out of its
    budget (so that it may be continued): (conversation, question, answer)."""
    _, default_pk = configs.configs(force=True)
    conversation = Conversation.objects.create(user=user, title="t", gateway_id=default_pk)
    question = Message.objects.create(conversation=conversation, role="user", content="hi")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content="Hel", parent=question
    )
    Generation.objects.create(
        message=answer,
        conversation=conversation,
        gateway_id=default_pk,
        model=model,
        status=Generation.Status.COMPLETED,
        finish_reason="length",
        max_tokens=16,
    )
    conversation.current_leaf = answer
    conversation.save()
    return conversation.pk, question.pk, answer.pk


@pytest.mark.parametrize(
    "model",
    [
        "not-listed",
        "ok?long_tokens=1000000",  # the emulator's options ride on a name no gateway lists
        "OK",
        "ok ",
    ],
)
async def test_a_model_the_gateway_does_not_list_is_refused_everywhere(
    alice: Any, settings: Any, model: str
) -> None:
    settings.CHAT_EMULATOR_REQUEST_OPTIONS = False  # as shipped
    conversation, question, answer = await sync_to_async(_finished_answer)(alice, "ok")
    _, default_pk = await configs.aconfigs()
    choice = f"g{default_pk}:{model}"
    attempts = {
        "send_new": (reverse("chat:send_new"), {"content": "q", "model": choice}),
        "send_new (bare)": (reverse("chat:send_new"), {"content": "q", "model": model}),
        "send": (reverse("chat:send", args=[conversation]), {"content": "q", "model": choice}),
        "retry": (reverse("chat:retry", args=[answer]), {"model": choice}),
        "edit": (reverse("chat:edit", args=[question]), {"content": "q2", "model": choice}),
    }
    before = await Generation.objects.acount()
    asked = len(CHAT_MODELS_ASKED)
    client = await signed_in(alice)
    for name, (url, data) in attempts.items():
        response = await client.post(url, data, headers=HTMX)
        assert response.status_code == 200, name
        assert response["HX-Retarget"] == "#composer-error", name
        said = html.unescape(response.content.decode())
        assert f"Default gateway does not offer the model {model!r}." in said, name
    assert await Generation.objects.acount() == before  # nothing in the ledger
    assert CHAT_MODELS_ASKED[asked:] == []  # nothing upstream


async def test_a_retry_or_continuation_keeps_only_a_listed_model(alice: Any, settings: Any) -> None:
    """An answer whose model is not listed (written before models were checked, or one the
    gateway no longer offers) is neither regenerated nor continued with it."""
    settings.CHAT_EMULATOR_REQUEST_OPTIONS = False
    _, _, answer = await sync_to_async(_finished_answer)(alice, "ok?long_tokens=1000000")
    asked = len(CHAT_MODELS_ASKED)
    client = await signed_in(alice)
    for url in (reverse("chat:retry", args=[answer]), reverse("chat:continue", args=[answer])):
        response = await client.post(url, {}, headers=HTMX)
        assert response["HX-Retarget"] == "#composer-error", url
        said = html.unescape(response.content.decode())
        assert "does not offer the model 'ok?long_tokens=1000000'." in said
    assert await Generation.objects.acount() == 1  # the answer's own
    assert CHAT_MODELS_ASKED[asked:] == []


async def test_a_listed_model_still_starts(alice: Any) -> None:
    """The control: the same requests with a listed model go through."""
    _, default_pk = await configs.aconfigs()
    client = await signed_in(alice)
    response = await client.post(
        reverse("chat:send_new"), {"content": "q", "model": f"g{default_pk}:ok"}
    )
    assert response.status_code == 302
    assert await Generation.objects.filter(model="ok").aexists()


async def test_when_the_list_cannot_be_read_the_turn_is_refused_saying_so(
    alice: Any, scripted_gateway: ScriptedGateway
) -> None:
    row = await sync_to_async(_hostile_gateway)(scripted_gateway, "models-data-5")
    configs.forget_configs()
    asked = len(CHAT_MODELS_ASKED)
    response = await (await signed_in(alice)).post(
        reverse("chat:send_new"), {"content": "q", "model": f"g{row.pk}:ok"}, headers=HTMX
    )
    assert response["HX-Retarget"] == "#composer-error"
    said = html.unescape(response.content.decode())
    assert f"{row.name}: Could not load the model list: the model list is not" in said
    assert "try again in a moment." in said
    assert await Generation.objects.acount() == 0
    assert CHAT_MODELS_ASKED[asked:] == []
