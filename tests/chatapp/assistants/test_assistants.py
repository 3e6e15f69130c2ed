"""Assistants (#41): who sees which (their own, and those an admin shares with everyone or with
their groups), what a chat started with one is sent (its system prompt, settings and tools, on
every turn), what the conversation records, and the Settings pages a user keeps theirs on.
Through Django's test clients and the emulator."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.test import AsyncClient, Client
from django.urls import reverse

from chatapp.assistants import sharing
from chatapp.assistants.models import Assistant
from chatapp.conversations.models import Conversation
from chatapp.gateways.configs import config_for
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorURL
from tests.emulator_requests import record_chat_bodies

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


@pytest.fixture
def received(emulator_url: EmulatorURL, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    return record_chat_bodies(emulator_url.app, monkeypatch)


def names(rows: Any) -> list[str]:
    return sorted(row.name for row in rows)


# --- Who sees which -------------------------------------------------------------------------


def test_a_user_sees_their_own_and_those_shared_with_everyone_or_their_groups(
    alice: Any, bob: Any
) -> None:
    writers, lawyers = Group.objects.create(name="writers"), Group.objects.create(name="lawyers")
    alice.groups.add(writers, lawyers)
    Assistant.objects.create(name="Alice's", owner=alice)
    Assistant.objects.create(name="Bob's", owner=bob)
    Assistant.objects.create(name="Everyone's")
    both = Assistant.objects.create(name="Writers' and lawyers'")
    both.groups.add(writers, lawyers)  # alice is in both: listed once
    Assistant.objects.create(name="Lawyers'").groups.add(lawyers)
    Assistant.objects.create(name="Nobody's group").groups.add(Group.objects.create(name="x"))

    assert names(sharing.visible(Assistant, alice)) == [
        "Alice's",
        "Everyone's",
        "Lawyers'",
        "Writers' and lawyers'",
    ]
    assert names(sharing.visible(Assistant, bob)) == ["Bob's", "Everyone's"]
    assert names(sharing.own(Assistant, alice)) == ["Alice's"]


# --- A chat started with one ----------------------------------------------------------------


def french_teacher(owner: Any | None = None) -> Assistant:
    return Assistant.objects.create(
        name="French teacher",
        owner=owner,
        system_prompt="Answer in French.",
        temperature=0.2,
        max_tokens=700,
        tools=["calculator"],
        gateway_id=config_for(None).pk,
        model="emulator/echo",
    )


async def test_a_chat_started_with_an_assistant_is_sent_its_prompt_settings_and_tools(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    assistant = await sync_to_async(french_teacher)(alice)
    client = await logged_in(alice)
    # No Settings posted (no script ran): the assistant's apply.
    response = await client.post(
        reverse("chat:send_new"),
        {"content": "Bonjour?", "model": "emulator/echo", "assistant": str(assistant.pk)},
        headers=HTMX,
    )
    assert response.status_code == 200
    await workers_finished()
    conversation = await Conversation.objects.aget(user=alice)
    assert (conversation.assistant_id, conversation.assistant_name) == (
        assistant.pk,
        "French teacher",
    )
    assert conversation.system_prompt == "Answer in French."
    first = received[0]
    assert first["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert (first["temperature"], first["max_tokens"]) == (0.2, 700)
    assert [tool["function"]["name"] for tool in first["tools"]] == ["calculator"]
    assert "Assistant: <strong>French teacher</strong>" in response.text, "the header says so"

    # Every turn is sent it as its system message, not only the first.
    response = await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "Et ensuite?", "model": "emulator/echo"},
        headers=HTMX,
    )
    assert response.status_code == 200
    await workers_finished()
    follow_up = next(b for b in received if b["messages"][-1]["content"] == "Et ensuite?")
    assert follow_up["messages"][0] == {"role": "system", "content": "Answer in French."}
    assert follow_up["temperature"] == 0.2


async def test_the_settings_posted_beside_it_win_over_the_assistants(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    """The assistant filled the new chat's Settings; what the user changed there is what goes."""
    assistant = await sync_to_async(french_teacher)(alice)
    client = await logged_in(alice)
    settings = {"new_chat_settings": "1", "system_prompt": "Answer in German.", "temperature": ""}
    await client.post(
        reverse("chat:send_new"),
        {"content": "Hallo?", "model": "emulator/echo", "assistant": assistant.pk, **settings},
        headers=HTMX,
    )
    await workers_finished()
    assert received[0]["messages"][0] == {"role": "system", "content": "Answer in German."}
    assert "temperature" not in received[0]
    conversation = await Conversation.objects.aget(user=alice)
    assert conversation.assistant_id == assistant.pk


async def test_another_users_assistant_starts_nothing(alice: Any, bob: Any) -> None:
    assistant = await sync_to_async(french_teacher)(bob)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"),
        {"content": "Hi", "model": "emulator/echo", "assistant": assistant.pk},
        headers=HTMX,
    )
    assert response["HX-Retarget"] == "#composer-error"
    assert "no longer available to you" in response.text
    assert not await Conversation.objects.filter(user=alice).aexists()


def test_choosing_one_fills_the_new_chats_settings_and_moves_the_picker(alice: Any) -> None:
    assistant = french_teacher()  # shared with everyone
    response = client_of(alice).get(
        reverse("chat:new_chat_assistant"), {"assistant": assistant.pk}, headers=HTMX
    )
    html = response.content.decode()
    assert 'id="new-chat-settings"' in html
    assert "Answer in French.</textarea>" in html
    assert "starting from the assistant French teacher" in html
    assert "System prompt · temperature 0.2 · max 700 tokens · tools: calculator" in html
    trigger = json.loads(response["HX-Trigger"])
    assert trigger == {"chat:model-chosen": {"value": f"g{config_for(None).pk}:emulator/echo"}}

    none = client_of(alice).get(reverse("chat:new_chat_assistant"), {"assistant": ""})
    assert "starting from your defaults" in none.content.decode()
    assert "HX-Trigger" not in none


async def test_the_new_chat_screen_lists_them_and_starts_with_one_from_a_link(
    alice: Any, bob: Any
) -> None:
    mine = await sync_to_async(french_teacher)(alice)
    await Assistant.objects.acreate(name="Bob's secret", owner=bob, system_prompt="Hidden")
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:home"))).text
    assert '<select id="assistant" name="assistant"' in html
    assert f'<option value="{mine.pk}">French teacher</option>' in html
    assert "Bob's secret" not in html
    assert 'name="temporary" value="1"' in html

    html = (await client.get(reverse("chat:home"), {"assistant": mine.pk})).text
    assert f'<option value="{mine.pk}" selected>French teacher</option>' in html
    assert "Answer in French.</textarea>" in html
    value = f"g{(await sync_to_async(config_for)(None)).pk}:emulator/echo"
    picker = html.split('id="model"')[1].split("</select>")[0]
    assert re.search(rf'<option value="{re.escape(value)}"[^>]*\bselected>', picker), (
        "the picker shows the assistant's model, not the preferred emulator/chat"
    )


# --- The Settings page ----------------------------------------------------------------------


async def test_a_user_adds_changes_and_deletes_their_own(alice: Any) -> None:
    client = await logged_in(alice)
    page = await client.get(reverse("chat:new_assistant"))
    assert page.status_code == 200
    gateway_pk = (await sync_to_async(config_for)(None)).pk
    value = f"g{gateway_pk}:emulator/echo"
    assert f'<option value="{value}">' in page.text
    response = await client.post(
        reverse("chat:new_assistant"),
        {
            "name": "Reviewer",
            "description": "Reviews code",
            "model": value,
            "system_prompt": "Review the code.",
            "temperature": "0.4",
            "tools": ["calculator"],
        },
    )
    assert response.status_code == 302
    row = await Assistant.objects.aget(owner=alice)
    assert (row.name, row.gateway_id, row.model, row.temperature, row.tools) == (
        "Reviewer",
        gateway_pk,
        "emulator/echo",
        0.4,
        ["calculator"],
    )
    listing = (await client.get(reverse("chat:assistants"))).text
    assert "Reviewer" in listing
    assert "System prompt · temperature 0.4 · tools: calculator" in listing

    response = await client.post(
        reverse("chat:edit_assistant", args=[row.pk]), {"name": "Reviewer 2", "model": ""}
    )
    assert response.status_code == 302
    await row.arefresh_from_db()
    assert (row.name, row.model, row.gateway_id, row.system_prompt) == ("Reviewer 2", "", None, "")

    response = await client.post(reverse("chat:delete_assistant", args=[row.pk]))
    assert response.status_code == 302
    assert not await Assistant.objects.aexists()


async def test_a_form_with_errors_says_what_is_wrong(alice: Any) -> None:
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:new_assistant"), {"name": "", "temperature": "5", "model": "gX:nothing"}
    )
    assert response.status_code == 200
    assert "Give the assistant a name." in response.text
    assert "Temperature is a number from 0 to 2" in response.text
    assert "Choose a model from the list." in response.text
    assert not await Assistant.objects.aexists()


async def test_no_one_changes_another_users_or_a_shared_one(alice: Any, bob: Any) -> None:
    bobs = await Assistant.objects.acreate(name="Bob's", owner=bob)
    shared = await Assistant.objects.acreate(name="Shared")
    client = await logged_in(alice)
    for row in (bobs, shared):
        edit = await client.get(reverse("chat:edit_assistant", args=[row.pk]))
        assert edit.status_code == 404
        delete = await client.post(reverse("chat:delete_assistant", args=[row.pk]))
        assert delete.status_code == 404
    assert await Assistant.objects.acount() == 2
    listing = (await client.get(reverse("chat:assistants"))).text
    assert "Shared with you" in listing
    assert "Shared" in listing
    assert "Bob&#x27;s" not in listing


async def test_a_deleted_assistant_leaves_its_name_on_the_conversations_it_started(
    alice: Any,
) -> None:
    assistant = await sync_to_async(french_teacher)(alice)
    conversation = await Conversation.objects.acreate(
        user=alice, title="Salut", assistant=assistant, assistant_name=assistant.name
    )
    client = await logged_in(alice)
    await client.post(reverse("chat:delete_assistant", args=[assistant.pk]))
    await conversation.arefresh_from_db()
    assert conversation.assistant_id is None
    page = await client.get(reverse("chat:conversation", args=[conversation.pk]))
    assert "Assistant: <strong>French teacher</strong>" in page.text


def test_an_admin_shares_one_with_a_group(alice: Any, bob: Any, django_user_model: Any) -> None:
    admin_user = django_user_model.objects.create_superuser("root", "", "pw")
    team = Group.objects.create(name="team")
    alice.groups.add(team)
    client = client_of(admin_user)
    assert client.get(reverse("admin:chatapp_assistant_add")).status_code == 200
    response = client.post(
        reverse("admin:chatapp_assistant_add"),
        {
            "name": "Team helper",
            "description": "",
            "owner": "",
            "groups": [team.pk],
            "gateway": "",
            "model": "",
            "system_prompt": "Be the team's helper.",
            "temperature": "",
            "max_tokens": "",
            "reasoning_effort": "",
            "tools": ["calculator"],
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    row = Assistant.objects.get(name="Team helper")
    assert (row.owner_id, row.tools) == (None, ["calculator"])
    assert names(sharing.visible(Assistant, alice)) == ["Team helper"]
    assert names(sharing.visible(Assistant, bob)) == []
    listing = client.get(reverse("admin:chatapp_assistant_changelist")).content.decode()
    assert "groups: team" in listing
    assert client.get(reverse("admin:chatapp_prompt_add")).status_code == 200
