"""What pages keep between requests (`chatapp.shared_cache`) and within one (`request_memo`):
kept while nothing changes, read again after any change that matters, in every process."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from chatapp import request_memo, shared_cache
from chatapp.access import group_policies
from chatapp.access.models import GroupPolicy
from chatapp.assistants.models import Assistant, Prompt
from chatapp.shared_cache.models import SharedVersion
from chatapp.tools import choosable
from chatapp.tools.models import ToolSwitch

pytestmark = pytest.mark.django_db


def _home(client: Client) -> str:
    response = client.get(reverse("chat:home"))
    assert response.status_code == 200
    return response.content.decode()


def test_a_value_is_kept_until_a_watched_row_changes(
    alice: Any, django_assert_num_queries: Any
) -> None:
    assert "calculator" in {tool.name for tool in choosable(alice.pk)}
    with django_assert_num_queries(1):  # the token alone
        assert "calculator" in {tool.name for tool in choosable(alice.pk)}
    ToolSwitch.objects.create(name="calculator", enabled=False)
    assert "calculator" not in {tool.name for tool in choosable(alice.pk)}


def test_a_group_policy_applies_at_once_when_set_and_when_joined(alice: Any) -> None:
    assert not group_policies.access_for(alice.pk).restricted
    group = Group.objects.create(name="Research")
    GroupPolicy.objects.create(group=group, model_patterns="emulator/chat")
    assert not group_policies.access_for(alice.pk).restricted  # not a member yet
    alice.groups.add(group)
    assert not group_policies.access_for(alice.pk).allows_model("Numes", "emulator/echo")
    GroupPolicy.objects.filter(group=group).get().delete()
    assert not group_policies.access_for(alice.pk).restricted


def test_an_assistant_or_prompt_made_or_shared_shows_on_the_next_page(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    assert "Translator" not in _home(client)
    Assistant.objects.create(owner=alice, name="Translator")
    Prompt.objects.create(owner=alice, name="summarise", text="Summarise this.")
    page = _home(client)
    assert "Translator" in page
    assert "summarise" in page
    shared = Assistant.objects.create(name="Reviewer")  # shared with everyone
    assert "Reviewer" in _home(client)
    group = Group.objects.create(name="Staff")
    shared.groups.add(group)  # now only the group's
    assert "Reviewer" not in _home(client)
    alice.groups.add(group)
    assert "Reviewer" in _home(client)


def test_a_new_token_is_written_in_the_transaction_of_the_change() -> None:
    shared_cache.changed()
    first = SharedVersion.objects.get().token
    ToolSwitch.objects.create(name="clock", enabled=False)
    assert SharedVersion.objects.get().token != first


def test_a_flushed_database_gets_a_token_of_its_own(alice: Any) -> None:
    SharedVersion.objects.all().delete()
    choosable(alice.pk)
    assert SharedVersion.objects.get().token


def test_a_request_remembers_a_value_once_and_nothing_outside_one() -> None:
    calls = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert request_memo.remember("k", compute) == 1
    assert request_memo.remember("k", compute) == 2  # no request: computed each time
    token = request_memo.begin()
    try:
        assert request_memo.remember("k", compute) == 3
        assert request_memo.remember("k", compute) == 3
    finally:
        request_memo.end(token)


def test_a_user_deleted_leaves_nothing_kept_for_their_pk(alice: Any, bob: Any) -> None:
    group = Group.objects.create(name="Research")
    GroupPolicy.objects.create(group=group, model_patterns="emulator/chat")
    bob.groups.add(group)
    assert group_policies.access_for(bob.pk).restricted
    before = SharedVersion.objects.get().token
    bob.delete()  # its memberships go in the cascade, with no m2m signal
    assert SharedVersion.objects.get().token != before
