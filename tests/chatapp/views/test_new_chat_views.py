"""The new-chat screen: its Settings beside the composer, applied to the conversation its first
message makes; the model picked first being the one last used; and the note on a model that
answers by calling a tool when no tool is on. Through Django's test clients and the emulator."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.urls import reverse

from chatapp.assistants.models import ChatDefaults
from chatapp.conversations.models import Conversation
from chatapp.costs.models import Generation
from chatapp.gateways import catalog, configs, key_vault
from chatapp.gateways.models import Gateway
from chatapp.streaming import worker
from chatapp.tools.models import ToolSwitch
from chatapp.views.chat import last_used_model
from gateway_client.emulator import EmulatorURL
from tests.emulator_requests import record_chat_bodies

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
CHOSEN = {
    "new_chat_settings": "1",
    "system_prompt": "Answer in French.",
    "temperature": "0.3",
    "max_tokens": "512",
    "reasoning_effort": "low",
    "tools": ["calculator"],
}


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def home(user: Any) -> str:
    response = await (await logged_in(user)).get(reverse("chat:home"))
    assert response.status_code == 200
    return str(response.content.decode())


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


@pytest.fixture
def received(emulator_url: EmulatorURL, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    return record_chat_bodies(emulator_url.app, monkeypatch)


def selected(html: str) -> str:
    found = re.findall(r'<option value="([^"]+)"[^>]*\bselected>', html.split('id="model"')[1])
    return str(found[0])


# --- Settings beside the composer -----------------------------------------------------------


async def test_the_new_chat_screen_offers_settings_from_the_defaults(alice: Any) -> None:
    await ChatDefaults.objects.acreate(user=alice, temperature=0.7, tools=["current_time"])
    html = await home(alice)
    composer = html[html.index('id="composer"') :]
    assert '<details class="settings-menu new-chat-settings">' in composer
    assert f'hx-post="{reverse("chat:new_chat_settings")}"' in composer
    assert 'hx-params="not content"' in composer, "the draft is not posted for the line"
    assert '<input type="hidden" name="new_chat_settings" value="1">' in composer
    assert re.search(r'<input type="number" name="temperature" value="0.7"', composer)
    assert re.search(
        r'<input type="checkbox" name="tools" value="current_time"[^>]* checked', composer
    )
    line = re.search(
        r'<p id="new-chat-applied" class="settings-applied" role="status">([^<]*)<', html
    )
    assert line
    assert line.group(1) == "temperature 0.7 · tools: date and time"


async def test_the_new_chat_screen_and_the_sidebar_lead_to_the_knowledge_page(alice: Any) -> None:
    """The first screen says "# for your documents": where they are made is a link away, as the
    assistants and prompts are (before, only Chat defaults' tabs led there)."""
    html = await home(alice)
    url = reverse("chat:knowledge")
    first = html[html.index('class="first-start"') :]
    assert f'<a href="{url}">Your documents</a>' in first[: first.index("</p>")]
    footer = html[html.index('class="logout"') :]
    assert f'<a href="{url}">Knowledge</a>' in footer[: footer.index("</form>")]


async def test_a_conversation_page_has_no_new_chat_settings(alice: Any) -> None:
    conversation = await Conversation.objects.acreate(user=alice, title="Salt")
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:conversation", args=[conversation.pk]))).text
    assert "new-chat-settings" not in html
    assert 'name="new_chat_settings"' not in html


async def test_the_first_message_makes_the_conversation_with_the_settings_chosen(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    await ChatDefaults.objects.acreate(user=alice, temperature=1.5, system_prompt="Be terse.")
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"),
        {"content": "What is 6 times 7?", "model": "emulator/echo", **CHOSEN},
        headers=HTMX,
    )
    assert response.status_code == 200
    await workers_finished()
    conversation = await Conversation.objects.aget(user=alice)
    row = (
        conversation.system_prompt,
        conversation.temperature,
        conversation.max_tokens,
        conversation.reasoning_effort,
        conversation.tools,
    )
    assert row == ("Answer in French.", 0.3, 512, "low", ["calculator"])
    body = received[0]  # the new chat's early request
    assert body["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert (body["temperature"], body["max_tokens"]) == (0.3, 512)
    assert body["reasoning"] == {"effort": "low"}, "the default gateway is Numes"
    assert [tool["function"]["name"] for tool in body["tools"]] == ["calculator"]
    # The header of the conversation swapped in says what applies; the defaults are unchanged.
    assert "System prompt · temperature 0.3 · max 512 tokens · effort low · tools: calculator" in (
        response.text
    )
    defaults = await ChatDefaults.objects.aget(user=alice)
    assert (defaults.temperature, defaults.system_prompt, defaults.tools) == (1.5, "Be terse.", [])


async def test_settings_emptied_beside_the_composer_leave_it_to_the_gateway(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    await ChatDefaults.objects.acreate(user=alice, temperature=1.5)
    client = await logged_in(alice)
    empty = {"new_chat_settings": "1", "temperature": "", "max_tokens": ""}
    await client.post(
        reverse("chat:send_new"), {"content": "hi", "model": "emulator/echo", **empty}, headers=HTMX
    )
    await workers_finished()
    assert (await Conversation.objects.aget(user=alice)).temperature is None
    assert "temperature" not in received[0]


async def test_without_settings_posted_a_new_chat_still_starts_from_the_defaults(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    await ChatDefaults.objects.acreate(user=alice, temperature=1.5)
    client = await logged_in(alice)
    data = {"content": "hi", "model": "emulator/echo", "temperature": "0.2"}  # no mark: ignored
    await client.post(reverse("chat:send_new"), data, headers=HTMX)
    await workers_finished()
    assert (await Conversation.objects.aget(user=alice)).temperature == 1.5
    assert received[0]["temperature"] == 1.5


async def test_a_wrong_setting_refuses_the_send_in_words_and_sends_nothing(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    client = await logged_in(alice)
    data = {"content": "hi", "model": "emulator/echo", **CHOSEN, "temperature": "3"}
    response = await client.post(reverse("chat:send_new"), data, headers=HTMX)
    assert response["HX-Retarget"] == "#composer-error"
    assert "Temperature is a number from 0 to 2, in steps of 0.1 (e.g. 0.7)." in response.text
    assert not await Conversation.objects.aexists()
    assert received == []


async def test_settings_on_a_follow_up_are_not_read(alice: Any) -> None:
    """Only a new chat takes them: a conversation's are saved under its header."""
    client = await logged_in(alice)
    await client.post(
        reverse("chat:send_new"), {"content": "one", "model": "emulator/echo"}, headers=HTMX
    )
    await workers_finished()
    conversation = await Conversation.objects.aget(user=alice)
    await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "two", "model": "emulator/echo", **CHOSEN},
        headers=HTMX,
    )
    await workers_finished()
    await conversation.arefresh_from_db()
    assert conversation.temperature is None
    assert conversation.tools == []


def test_the_line_of_what_the_settings_apply_is_asked_for_and_nothing_saved(
    alice: Any, emulator_url: EmulatorURL
) -> None:
    tiny = Gateway.objects.create(
        name="tiny",
        base_url=f"{emulator_url}/tiny/v1",
        dialect="tiny",
        cost_unit="usd",
        api_key_encrypted=key_vault.encrypt("k"),
    )
    configs.forget_configs()
    client = Client()
    client.force_login(alice)
    url = reverse("chat:new_chat_settings")
    response = client.post(url, {**CHOSEN, "model": "emulator/echo"}, headers=HTMX)
    assert response.text.strip() == (
        '<p id="new-chat-applied" class="settings-applied" role="status">System prompt · '
        "temperature 0.3 · max 512 tokens · effort low · tools: calculator</p>"
    )
    on_tiny = {**CHOSEN, "model": catalog.choice_value(tiny.pk, "emulator/echo")}
    line = client.post(url, on_tiny, headers=HTMX).text
    assert "effort low (not sent: tiny-3b takes none)" in line
    assert "tools: calculator (not sent: tiny-3b takes none)" in line
    empty = client.post(url, {"new_chat_settings": "1"}, headers=HTMX).text
    assert 'class="settings-applied is-default"' in empty
    assert "Gateway defaults" in empty
    wrong = client.post(url, {**CHOSEN, "max_tokens": "0"}, headers=HTMX).text
    assert 'class="settings-applied error"' in wrong
    assert "Max tokens is a whole number from 1 to 1,000,000." in wrong
    assert not ChatDefaults.objects.exists()
    assert not Conversation.objects.exists()


def test_the_line_needs_sign_in_and_a_post(alice: Any) -> None:
    url = reverse("chat:new_chat_settings")
    assert Client().post(url, CHOSEN).status_code == 302
    client = Client()
    client.force_login(alice)
    assert client.get(url).status_code == 405


# --- The model last used --------------------------------------------------------------------


async def test_a_new_chat_preselects_the_model_of_the_latest_generation(
    alice: Any, bob: Any, emulator_url: EmulatorURL
) -> None:
    osmexo = await Gateway.objects.acreate(
        name="Osmexo",
        base_url=f"{emulator_url}/osmexo/v1",
        dialect="osmexo",
        cost_unit="micro_usd",
        api_key_encrypted=key_vault.encrypt("osmexo-key"),
    )
    configs.forget_configs()
    default = (await sync_to_async(configs.config_for)(None)).pk
    assert selected(await home(alice)) == f"g{default}:emulator/chat", "none used yet"
    client = await logged_in(alice)
    on_osmexo = catalog.choice_value(osmexo.pk, "emulator/echo")
    await client.post(reverse("chat:send_new"), {"content": "a", "model": on_osmexo}, headers=HTMX)
    await workers_finished()
    assert selected(await home(alice)) == on_osmexo
    assert selected(await home(bob)) == f"g{default}:emulator/chat", "alice's, not bob's"


async def test_the_latest_generation_counts_not_the_conversation_touched_last(
    alice: Any,
) -> None:
    """Renaming an older conversation moves it up the sidebar; its model is not the last used."""
    client = await logged_in(alice)
    default = (await sync_to_async(configs.config_for)(None)).pk
    for model in ("emulator/long", "emulator/echo"):
        await client.post(
            reverse("chat:send_new"), {"content": model, "model": model}, headers=HTMX
        )
        await workers_finished()
    older = await Conversation.objects.aget(user=alice, model="emulator/long")
    await client.post(reverse("chat:rename", args=[older.pk]), {"title": "Renamed"}, headers=HTMX)
    newest = await Conversation.objects.order_by("-updated_at").afirst()
    assert newest is not None
    assert newest.pk == older.pk
    assert selected(await home(alice)) == f"g{default}:emulator/echo"


def test_a_read_aloud_is_not_a_model_used(alice: Any) -> None:
    Generation.objects.create(user=alice, model="emulator/echo")
    Generation.objects.create(user=alice, model="tts-1", kind=Generation.Kind.READ_ALOUD)
    assert last_used_model(alice) == (None, "emulator/echo")


async def test_a_title_is_not_a_model_used(alice: Any) -> None:
    """A conversation's title is written by a generation of its own, after its first answer: it
    made every new chat start on the title model."""
    make = sync_to_async(Generation.objects.create)
    await make(user=alice, model="emulator/image", kind=Generation.Kind.IMAGE)
    assert await sync_to_async(last_used_model)(alice) == (None, "emulator/image")
    await make(user=alice, model="emulator/echo")
    await make(user=alice, model="emulator/title", kind=Generation.Kind.TITLE)
    assert await sync_to_async(last_used_model)(alice) == (None, "emulator/echo")
    default = (await sync_to_async(configs.config_for)(None)).pk
    assert selected(await home(alice)) == f"g{default}:emulator/echo"


async def test_a_model_no_longer_listed_falls_back_to_the_preferred_one(alice: Any) -> None:
    await sync_to_async(Generation.objects.create)(user=alice, model="gone/model")
    default = (await sync_to_async(configs.config_for)(None)).pk
    assert selected(await home(alice)) == f"g{default}:emulator/chat"


async def test_a_conversation_keeps_its_own_model(alice: Any) -> None:
    client = await logged_in(alice)
    for model in ("emulator/long", "emulator/echo"):
        await client.post(
            reverse("chat:send_new"), {"content": model, "model": model}, headers=HTMX
        )
        await workers_finished()
    older = await Conversation.objects.aget(user=alice, model="emulator/long")
    page = (await client.get(reverse("chat:conversation", args=[older.pk]))).text
    assert selected(page).endswith(":emulator/long")


# --- A model that answers by calling a tool -------------------------------------------------


async def test_a_model_known_to_call_tools_is_marked_and_the_note_offers_tools(
    alice: Any,
) -> None:
    html = await home(alice)
    assert re.search(r'<option value="g\d+:emulator/tools"[^>]* data-wants-tools[ >]', html)
    assert not re.search(r'<option value="g\d+:emulator/echo"[^>]* data-wants-tools', html)
    note = html[html.index("data-tools-note") :]
    note = note[: note.index("</p>")]
    assert "This model answers by calling a tool, and no tools are on for this chat" in note
    assert '<button type="button" class="link" data-choose-tools>Turn tools on</button>' in note


async def test_with_every_tool_switched_off_the_note_says_so_with_no_button(alice: Any) -> None:
    await ToolSwitch.objects.abulk_create(
        [
            ToolSwitch(name=name, enabled=False)
            for name in ("calculator", "current_time", "search_conversations")
        ]
    )
    html = await home(alice)
    note = html[html.index("data-tools-note") :]
    note = note[: note.index("</p>")]
    assert "an admin has switched every tool off" in note
    assert "data-choose-tools" not in note


async def test_a_conversation_header_says_whether_its_tools_are_on(alice: Any) -> None:
    client = await logged_in(alice)
    off = await Conversation.objects.acreate(user=alice, title="Off")
    on = await Conversation.objects.acreate(user=alice, title="On", tools=["calculator"])
    for conversation, said in ((off, "false"), (on, "true")):
        page = (await client.get(reverse("chat:conversation", args=[conversation.pk]))).text
        assert f'<div id="answer-settings" class="answer-settings" data-tools-on="{said}">' in page


def test_only_the_emulators_tool_scenario_is_known_to_want_tools() -> None:
    from gateway_client import ModelInfo

    wanted = [
        name
        for name in ("emulator/tools", "emulator/chat", "tools", "openai/gpt-4o", "x/tools")
        if catalog.wants_tools(ModelInfo(id=name))
    ]
    assert wanted == ["emulator/tools"]
