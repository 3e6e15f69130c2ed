"""Keeping many conversations: pins first, archive and restore (out of the sidebar, still found by
search), folders (create, rename, delete keeping their conversations, move, fold), several at once
(archive, delete keeping the ledger), and nobody else's conversations or folders."""

from __future__ import annotations

import asyncio
import datetime
import re
from decimal import Decimal
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils import timezone

from chatapp.conversations.models import Conversation, Folder, Message
from chatapp.costs.models import Generation
from chatapp.gateways.models import Gateway
from chatapp.messaging import socket_messages

HTMX = {"HX-Request": "true"}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def on_page_of(pk: int | None) -> dict[str, str]:
    path = reverse("chat:conversation", args=[pk]) if pk else reverse("chat:home")
    return {**HTMX, "HX-Current-URL": f"http://testserver{path}"}


def made(user: Any, title: str, days_ago: float = 0) -> Conversation:
    conversation = Conversation.objects.create(user=user, title=title)
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content=title)
    when = timezone.now() - datetime.timedelta(days=days_ago)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=when)
    return conversation


def titles(html: str) -> list[str]:
    """The sidebar's conversation titles, top to bottom."""
    return re.findall(r'id="conversation-link-\d+">([^<]+)</a>', html)


def section(html: str, start: str, end: str) -> str:
    return html[html.index(start) : html.index(end)]


def sidebar_of(user: Any) -> str:
    return client_for(user).get(reverse("chat:home")).content.decode()


# --- Pins -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pinned_conversations_come_first_newest_pin_first_and_pinning_is_not_activity(
    alice: Any,
) -> None:
    old = made(alice, "old but pinned", days_ago=30)
    also = made(alice, "pinned second", days_ago=3)
    made(alice, "today")
    client = client_for(alice)
    for conversation in (also, old):  # `old` is pinned last, so it is listed first
        response = client.post(reverse("chat:pin", args=[conversation.pk]), headers=HTMX)
        assert response.status_code == 200
    html = response.content.decode()
    assert (
        'id="conversation-groups" class="conversation-groups" hx-boost="true" hx-swap-oob' in html
    )
    assert titles(html) == ["old but pinned", "pinned second", "today"]
    pinned = section(html, 'id="date-group-pinned"', 'id="date-group-today"')
    assert "old but pinned" in pinned
    assert "today" not in titles(pinned)
    assert "Unpin" in pinned
    # Its last activity is what it was: unpinned, it goes back to its date group.
    assert Conversation.objects.get(pk=old.pk).updated_at < timezone.now() - datetime.timedelta(
        days=29
    )
    client.post(reverse("chat:pin", args=[old.pk]), {"pinned": "0"}, headers=HTMX)
    assert titles(sidebar_of(alice)) == ["pinned second", "today", "old but pinned"]


# --- Archive ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_archived_conversation_leaves_the_sidebar_but_search_finds_it_and_restore_brings_it_back(
    alice: Any,
) -> None:
    kept = made(alice, "otters in kelp")
    client = client_for(alice)
    response = client.post(reverse("chat:archive", args=[kept.pk]), headers=on_page_of(None))
    assert response.status_code == 200
    assert "otters in kelp" not in titles(response.content.decode())
    home = sidebar_of(alice)
    assert "otters in kelp" not in titles(home)
    assert '<a href="/archived/">Archived (1)</a>' in home
    found = client.get(reverse("chat:search"), {"q": "kelp"}).content.decode()
    assert f'href="/c/{kept.pk}/"' in found
    assert '<span class="hit-archived">archived</span>' in found
    archived = client.get(reverse("chat:archived")).content.decode()
    assert "otters in kelp" in archived
    page = client.get(reverse("chat:conversation", args=[kept.pk])).content.decode()
    assert "Archived: not listed in the sidebar" in page
    response = client.post(reverse("chat:restore", args=[kept.pk]), headers=HTMX)
    assert response.status_code == 200
    assert response.content == b""  # the Archived page's row goes
    assert titles(sidebar_of(alice)) == ["otters in kelp"]
    assert "otters in kelp" not in client.get(reverse("chat:archived")).content.decode()


@pytest.mark.django_db
def test_archiving_the_conversation_on_screen_leaves_its_page(alice: Any) -> None:
    shown = made(alice, "on screen")
    response = client_for(alice).post(
        reverse("chat:archive", args=[shown.pk]), headers=on_page_of(shown.pk)
    )
    assert response["HX-Redirect"] == reverse("chat:home")
    assert Conversation.objects.get(pk=shown.pk).archived_at is not None


@pytest.mark.django_db
def test_an_archived_conversations_costs_stay_in_the_ledger(alice: Any) -> None:
    conversation = made(alice, "costly")
    generation = ledger_row(alice, conversation)
    client_for(alice).post(reverse("chat:archive", args=[conversation.pk]), headers=HTMX)
    assert Generation.objects.get(pk=generation.pk).conversation_id == conversation.pk


# --- Folders -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_folders_are_made_renamed_filled_folded_and_deleted_keeping_their_conversations(
    alice: Any,
) -> None:
    client = client_for(alice)
    trip = made(alice, "flights to Lisbon")
    made(alice, "loose")
    response = client.post(reverse("chat:create_folder"), {"name": "  Travel\n"}, headers=HTMX)
    folder = Folder.objects.get(user=alice)
    assert folder.name == "Travel"
    assert f'id="folder-toggle-{folder.pk}"' in response.content.decode()
    # A second of the same name (any case) is refused, in words.
    response = client.post(reverse("chat:create_folder"), {"name": "travel"}, headers=HTMX)
    assert "There is a folder named “travel” already." in response.content.decode()
    assert Folder.objects.count() == 1
    # The entry menu's form lists the folders, and moving files it.
    form = client.get(reverse("chat:move", args=[trip.pk]), headers=HTMX).content.decode()
    assert f'<option value="{folder.pk}">Travel</option>' in form
    response = client.post(
        reverse("chat:move", args=[trip.pk]), {"folder": folder.pk}, headers=HTMX
    )
    html = response.content.decode()
    inside = section(html, f'id="folder-{folder.pk}"', 'id="date-group-today"')
    assert "flights to Lisbon" in inside
    assert "loose" not in inside
    client.post(reverse("chat:rename_folder", args=[folder.pk]), {"name": "Trips"}, headers=HTMX)
    assert Folder.objects.get(pk=folder.pk).name == "Trips"
    # Folded, and remembered at the next page.
    response = client.post(reverse("chat:collapse_folder", args=[folder.pk]), {"collapsed": "1"})
    assert response.status_code == 204
    home = sidebar_of(alice)
    assert f'aria-expanded="false" aria-controls="folder-list-{folder.pk}"' in home
    assert re.search(rf'id="folder-list-{folder.pk}"[^>]*hidden', home)
    client.post(reverse("chat:delete_folder", args=[folder.pk]), headers=HTMX)
    assert not Folder.objects.exists()
    assert Conversation.objects.get(pk=trip.pk).folder_id is None
    assert set(titles(sidebar_of(alice))) == {"loose", "flights to Lisbon"}
    # Out of any folder by the form's "No folder", too.
    other = Folder.objects.create(user=alice, name="Work")
    client.post(reverse("chat:move", args=[trip.pk]), {"folder": other.pk}, headers=HTMX)
    client.post(reverse("chat:move", args=[trip.pk]), {"folder": ""}, headers=HTMX)
    assert Conversation.objects.get(pk=trip.pk).folder_id is None


# --- Several at once --------------------------------------------------------------------------


def ledger_row(user: Any, conversation: Conversation) -> Generation:
    gateway, _ = Gateway.objects.get_or_create(
        name="Numes", defaults={"base_url": "https://numes.example/api/v1", "cost_unit": "usd"}
    )
    answer = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, content="an answer"
    )
    return Generation.objects.create(
        user=user,
        message=answer,
        conversation=conversation,
        gateway=gateway,
        model="numes/otter-1",
        status="completed",
        cost=Decimal("0.002"),
        cost_unit="usd",
        cost_source="stream",
        finished_at=timezone.now(),
    )


@pytest.mark.django_db(transaction=True)
def test_bulk_delete_removes_the_conversations_and_keeps_their_costs(alice: Any) -> None:
    first, second, kept = made(alice, "one"), made(alice, "two"), made(alice, "kept")
    rows = [ledger_row(alice, first), ledger_row(alice, second)]
    response = client_for(alice).post(
        reverse("chat:bulk"),
        {"action": "delete", "pk": [first.pk, second.pk, "junk"]},
        headers=on_page_of(kept.pk),
    )
    assert response.status_code == 200
    assert titles(response.content.decode()) == ["kept"]
    assert list(Conversation.objects.values_list("title", flat=True)) == ["kept"]
    for row in rows:
        generation = Generation.objects.get(pk=row.pk)
        assert generation.conversation_id is None
        assert generation.cost == Decimal("0.002")


@pytest.mark.django_db(transaction=True)
def test_bulk_archive_and_the_page_shown_among_them_goes_home(alice: Any) -> None:
    first, second = made(alice, "one"), made(alice, "two")
    made(alice, "kept")
    ledger_row(alice, first)
    response = client_for(alice).post(
        reverse("chat:bulk"),
        {"action": "archive", "pk": [first.pk, second.pk]},
        headers=on_page_of(first.pk),
    )
    assert response["HX-Redirect"] == reverse("chat:home")
    archived = Conversation.objects.filter(archived_at__isnull=False)
    assert set(archived.values_list("pk", flat=True)) == {first.pk, second.pk}
    assert titles(sidebar_of(alice)) == ["kept"]
    assert Generation.objects.filter(conversation=first).count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_unknown_bulk_action_changes_nothing(alice: Any) -> None:
    one = made(alice, "one")
    response = client_for(alice).post(
        reverse("chat:bulk"), {"action": "explode", "pk": [one.pk]}, headers=HTMX
    )
    assert response.status_code == 400
    assert Conversation.objects.filter(pk=one.pk, archived_at__isnull=True).exists()


# --- Nobody else's ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_nobody_pins_archives_moves_or_bulk_deletes_anothers_conversations(
    alice: Any, bob: Any
) -> None:
    theirs = made(alice, "alice's secret")
    their_folder = Folder.objects.create(user=alice, name="Alice's folder")
    mine = made(bob, "bob's")
    bob_client = client_for(bob)
    for name in ("pin", "archive", "restore"):
        response = bob_client.post(reverse(f"chat:{name}", args=[theirs.pk]), headers=HTMX)
        assert response.status_code == 404, name
    assert bob_client.get(reverse("chat:move", args=[theirs.pk])).status_code == 404
    # Bob's conversation into Alice's folder: refused.
    response = bob_client.post(
        reverse("chat:move", args=[mine.pk]), {"folder": their_folder.pk}, headers=HTMX
    )
    assert response.status_code == 404
    for name in ("rename_folder", "delete_folder", "collapse_folder"):
        response = bob_client.post(
            reverse(f"chat:{name}", args=[their_folder.pk]), {"name": "mine now"}, headers=HTMX
        )
        assert response.status_code == 404, name
    bob_client.post(reverse("chat:bulk"), {"action": "delete", "pk": [theirs.pk]}, headers=HTMX)
    bob_client.post(reverse("chat:bulk"), {"action": "archive", "pk": [theirs.pk]}, headers=HTMX)
    still = Conversation.objects.get(pk=theirs.pk)
    assert still.pinned_at is None
    assert still.archived_at is None
    assert Folder.objects.get(pk=their_folder.pk).name == "Alice's folder"
    # And Bob's pages show none of Alice's.
    Conversation.objects.filter(pk=theirs.pk).update(
        archived_at=timezone.now(), folder=their_folder
    )
    for url in (reverse("chat:home"), reverse("chat:archived"), reverse("chat:sidebar")):
        html = bob_client.get(url).content.decode()
        assert "alice" not in html.lower(), url


# --- The user's other tabs ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_change_is_pushed_to_the_users_own_tabs_only(alice: Any, bob: Any) -> None:
    layer = socket_messages.channel_layer()
    mine, theirs = await layer.new_channel(), await layer.new_channel()
    await layer.group_add(socket_messages.user_group_name(alice.pk), mine)
    await layer.group_add(socket_messages.user_group_name(bob.pk), theirs)
    conversation = await sync_to_async(made)(alice, "to pin")
    client = AsyncClient()
    await client.aforce_login(alice)
    response = await client.post(reverse("chat:pin", args=[conversation.pk]), headers=HTMX)
    assert response.status_code == 200
    message = await asyncio.wait_for(layer.receive(mine), 5)
    assert orjson.loads(message["text"]) == {"t": "sidebar"}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(theirs), 0.3)
