"""`views.not_found`: the app's 404 pages, a conversation's with the sidebar."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations.models import Conversation

pytestmark = [pytest.mark.django_db(transaction=True)]

MISSING = "This conversation does not exist or was deleted."


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


def main_of(html: str) -> str:
    return html[html.index("<main") : html.index("</main>")]


async def test_a_conversation_that_is_not_there_gets_the_chat_page_with_the_sidebar(
    alice: Any,
) -> None:
    await Conversation.objects.acreate(user=alice, title="Otters of the north")
    response = await (await logged_in(alice)).get(reverse("chat:conversation", args=[999]))
    assert response.status_code == 404
    html = response.content.decode()
    assert MISSING in html
    assert f'href="{reverse("chat:home")}">Start a new chat</a>' in html
    assert "Otters of the north" in html, "the sidebar is there"


async def test_another_users_conversation_is_word_for_word_one_that_never_was(
    alice: Any, bob: Any
) -> None:
    theirs = await Conversation.objects.acreate(user=bob, title="Plans of bob")
    client = await logged_in(alice)
    seen = await client.get(reverse("chat:conversation", args=[theirs.pk]))
    never = await client.get(reverse("chat:conversation", args=[theirs.pk + 1]))
    assert seen.status_code == never.status_code == 404
    assert "Plans of bob" not in seen.content.decode()
    assert main_of(seen.content.decode()) == main_of(never.content.decode())


async def test_any_other_address_gets_a_plain_page_of_ours(alice: Any) -> None:
    for client in (AsyncClient(), await logged_in(alice)):
        response = await client.get("/nowhere/")
        assert response.status_code == 404
        html = response.content.decode()
        assert "Page not found" in html
        assert MISSING not in html


async def test_a_deleted_conversation_is_not_there(alice: Any) -> None:
    conversation = await Conversation.objects.acreate(user=alice, title="Soon gone")
    url = reverse("chat:conversation", args=[conversation.pk])
    await conversation.adelete()
    response = await (await logged_in(alice)).get(url)
    assert response.status_code == 404
    assert MISSING in response.content.decode()
