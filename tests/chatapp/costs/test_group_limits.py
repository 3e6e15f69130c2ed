"""Group spending limits (`spending_limits`, with `SpendingLimit.group`): the members share them,
through the same reservation as every limit (refused in words before anything goes upstream, one
reservation at a time under the limit's lock); the generations they count are those recorded as
the group's when they started (`GenerationGroup`); the sidebar shows each; the admin edits them
on the group's page."""

from __future__ import annotations

import asyncio
import datetime
import re
import threading
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.urls import reverse

from chatapp import records_thread
from chatapp.access.models import GroupPolicy
from chatapp.conversations.models import Conversation
from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs import ledger, spending_limits
from chatapp.costs.models import (
    Generation,
    GenerationGroup,
    LedgerDay,
    LedgerDayGroup,
    SpendingLimit,
)
from chatapp.costs.spending_limits import Ceiling, SpendingLimitReached, period_bounds
from chatapp.errors import LedgerIsAppendOnly
from chatapp.gateways.units import CostUnit
from chatapp.streaming import worker
from tests.chatapp.conftest import UpstreamLog, logged_in
from tests.chatapp.costs.test_spending_limits import (
    DEAR,
    default_gateway,
    limit,
    priced,
    refused,
    spent,
)
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}


async def group_of(*users: Any, name: str = "Team Research") -> Group:
    group = await Group.objects.acreate(name=name)
    for user in users:
        await user.groups.aadd(group)
    return group


# --- What a group's limit counts ----------------------------------------------------------------


async def test_a_generation_records_the_groups_its_user_is_in_when_it_starts(alice: Any) -> None:
    before = await spent(alice, "1")
    research = await group_of(alice)
    support = await group_of(alice, name="Support")
    during = await spent(alice, "2")
    await alice.groups.aremove(support)
    links = GenerationGroup.objects.order_by("group_name").values_list("group_name", flat=True)
    assert [name async for name in links.filter(generation=during)] == ["Support", "Team Research"]
    assert not await GenerationGroup.objects.filter(generation=before).aexists()
    # A group deleted later keeps its name on the rows; the rows stay (they are money facts).
    await support.adelete()
    kept = await GenerationGroup.objects.aget(generation=during, group__isnull=True)
    assert kept.group_name == "Support"
    with pytest.raises(LedgerIsAppendOnly):
        await sync_to_async(GenerationGroup.objects.all().delete)()
    assert await GenerationGroup.objects.filter(group=research).acount() == 1


async def test_the_members_share_the_groups_limit_beside_their_own(alice: Any, bob: Any) -> None:
    row = await default_gateway()
    group = await group_of(alice, bob)
    await spent(alice, "0.75")
    await limit("1", group=group)
    await limit("10", user=bob)
    ceiling = Ceiling(1, 1, CostUnit.USD, Decimal("0.15"), Decimal("0.15"))  # 0.30

    def reserve(user_pk: int) -> Any:
        with transaction.atomic():
            return spending_limits.reserve(user_pk, row.pk, ceiling)

    with pytest.raises(SpendingLimitReached) as refusal:
        await sync_to_async(reserve)(bob.pk)
    _, resets = period_bounds("month")
    assert str(refusal.value) == (
        "This answer could cost up to $0.30, more than the $0.25 left of the Team Research "
        f"group's spending limit of $1.00 a month; it resets on 1 {resets:%B} at 00:00 UTC."
    )
    # Once she left, the group's limit is not hers, and what she spends is not the group's.
    await alice.groups.aremove(group)
    await spent(alice, "5")
    assert await sync_to_async(reserve)(alice.pk) is None
    assert await GenerationGroup.objects.filter(group=group).acount() == 1


async def test_a_send_past_the_groups_limit_is_refused_in_words_and_nothing_goes_upstream(
    alice: Any, bob: Any, upstream: UpstreamLog
) -> None:
    await priced("emulator/chat")
    group = await group_of(alice, bob)
    await spent(alice, "1")
    await limit("1", group=group)
    client = await logged_in(bob)
    response = await client.post(
        reverse("chat:send_new"), {"content": "Otters?", "model": "emulator/chat"}, headers=HTMX
    )
    _, resets = period_bounds("month")
    assert refused(response) == (
        "The Team Research group&#x27;s spending limit of $1.00 a month is used up; it resets on "
        f"1 {resets:%B} at 00:00 UTC."
    )
    assert upstream.new() == []
    assert await Conversation.objects.acount() == 0


async def test_the_sidebar_shows_each_limit_that_applies(alice: Any, bob: Any) -> None:
    group = await group_of(alice)
    await spent(alice, "120")
    await limit("500", group=group)
    await limit("20", user=alice, period=SpendingLimit.Period.DAY)
    await limit("30", group=await Group.objects.acreate(name="Not hers"))
    html = (await (await logged_in(alice)).get("/")).content.decode()
    assert '<p class="limit-left">Team Research: $380.00 of $500.00 left this month</p>' in html
    assert "$0.00 of $20.00 left today" in html
    assert "Not hers" not in html
    assert "Team Research" not in (await (await logged_in(bob)).get("/")).content.decode()


async def test_twenty_turns_of_two_members_at_once_start_only_what_the_group_allows(
    alice: Any, bob: Any
) -> None:
    """On one process the records thread runs turns one at a time; on PostgreSQL
    (`tests/multiprocess/suite.py`) the next test shows the lock itself."""
    await priced("emulator/echo")
    group = await group_of(alice, bob)
    members = [alice, bob] * 10
    conversations = [
        await Conversation.objects.acreate(user=user, max_tokens=98) for user in members
    ]
    one = DEAR + 98 * DEAR  # "hi" is one token: 0.099 each
    await limit(str(5 * one + one / 2), group=group)
    owner = await worker.owner_channel()
    results = await asyncio.gather(
        *(
            records_thread.on_record_thread(
                create_turn,
                user,
                TurnRequest(
                    text="hi", answerer=Answerer(model="emulator/echo"), conversation_pk=c.pk
                ),
                owner,
            )
            for user, c in zip(members, conversations, strict=True)
        ),
        return_exceptions=True,
    )
    started = [r for r in results if not isinstance(r, BaseException)]
    assert all(isinstance(r, SpendingLimitReached) for r in results if r not in started)
    assert len(started) == 5
    assert await GenerationGroup.objects.filter(group=group).acount() == 5


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has one writer at a time")
async def test_a_members_check_waits_for_another_members_reservation_to_commit(
    alice: Any, bob: Any
) -> None:
    """The group's limit row is locked while a member's turn is written: bob's check waits for
    alice's commit, then counts her reservation (recorded as the group's in that transaction)."""
    row = await priced("emulator/chat")
    group = await group_of(alice, bob)
    ceiling = Ceiling(1, 1, CostUnit.USD, DEAR, DEAR)
    await limit("0.003", group=group)  # room for one worst case of 0.002
    reserved, release = threading.Event(), threading.Event()

    def first() -> None:
        try:
            with transaction.atomic():
                watch = spending_limits.reserve(alice.pk, row.pk, ceiling)
                assert watch is not None
                Generation.objects.create(
                    user=alice, gateway=row, model="emulator/chat", spend_ceiling=watch.reserved
                )
                reserved.set()
                release.wait(30)
        finally:
            connection.close()

    def second() -> object:
        try:
            with transaction.atomic():
                return spending_limits.reserve(bob.pk, row.pk, ceiling)
        except SpendingLimitReached as exc:
            return exc
        finally:
            connection.close()

    def waiting_on_a_lock() -> bool:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
                (count,) = cursor.fetchone()
            return bool(count)
        finally:
            connection.close()

    holding = asyncio.ensure_future(asyncio.to_thread(first))
    await eventually(reserved.is_set, what="alice's reservation")
    checking = asyncio.ensure_future(asyncio.to_thread(second))
    try:
        await eventually(
            lambda: asyncio.to_thread(waiting_on_a_lock),
            what="bob's check to wait on the group limit's lock",
        )
        assert not checking.done()
    finally:
        release.set()
        await holding
    assert isinstance(await checking, SpendingLimitReached)


# --- Retention and the admin --------------------------------------------------------------------


async def test_folding_keeps_what_the_group_spent_for_its_limit(alice: Any, bob: Any) -> None:
    group = await group_of(alice, bob)
    await spent(alice, "1")
    await alice.groups.aremove(group)
    await spent(alice, "2")  # hers alone: the same day, user and model, another daily total
    shared = await limit("10", group=group)
    used = sync_to_async(lambda: spending_limits.standing(shared, bob.pk).used)
    assert await used() == 1
    tomorrow = datetime.datetime.now(datetime.UTC).date() + datetime.timedelta(days=1)
    report = await sync_to_async(ledger.fold)(tomorrow)
    assert report.generations == 2
    assert not await Generation.objects.aexists()
    assert not await GenerationGroup.objects.aexists()  # folded with their generations
    totals = [(day.cost, day.generations) async for day in LedgerDay.objects.order_by("cost_whole")]
    assert totals == [(1, 1), (2, 1)]
    (link,) = [link async for link in LedgerDayGroup.objects.select_related("ledger_day")]
    assert (link.group_id, link.group_name, link.ledger_day.cost) == (group.pk, "Team Research", 1)
    assert await used() == 1
    with pytest.raises(LedgerIsAppendOnly):
        await sync_to_async(LedgerDayGroup.objects.all().delete)()


def test_the_group_page_edits_its_policy_and_its_limits(alice: Any, client: Any) -> None:
    root = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(root)
    group = Group.objects.create(name="Team Research")
    form = {
        "name": "Team Research",
        "chat_policy-TOTAL_FORMS": "1",
        "chat_policy-INITIAL_FORMS": "0",
        "chat_policy-0-model_patterns": "emulator/*",
        "chat_policy-0-tool_patterns": "calculator",
        "spending_limits-TOTAL_FORMS": "1",
        "spending_limits-INITIAL_FORMS": "0",
        "spending_limits-0-unit": "usd",
        "spending_limits-0-period": "month",
        "spending_limits-0-amount": "500",
        "spending_limits-0-unknown_price": "allow",
    }
    url = reverse("admin:auth_group_change", args=[group.pk])
    typo = client.post(url, {**form, "chat_policy-0-tool_patterns": "calculater"})
    assert "No tool is named calculater" in typo.content.decode()
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    policy = GroupPolicy.objects.get(group=group)
    assert (policy.model_patterns, policy.tool_patterns) == ("emulator/*", "calculator")
    (shared,) = SpendingLimit.objects.filter(group=group)
    assert (shared.amount, shared.user_id, shared.gateway_id) == (500, None, None)
    listed = client.get(reverse("admin:auth_group_changelist")).content.decode()
    assert "models: emulator/*" in listed
    alice.groups.add(group)
    Generation.objects.create(
        user=alice, model="m", cost=Decimal("120"), cost_unit="usd", cost_source="stream"
    )
    limits = client.get("/admin/chatapp/spendinglimit/").content.decode()
    assert re.search(r'field-scope"><a href="[^"]+">group Team Research</a>', limits)
    assert '<td class="field-used_so_far">$120.00</td>' in limits
    assert '<td class="field-left">$380.00</td>' in limits
    both = {"user": alice.pk, "group": group.pk, "unit": "usd", "period": "month"}
    refused = client.post(
        "/admin/chatapp/spendinglimit/add/", {**both, "amount": "1", "unknown_price": "allow"}
    )
    assert "A limit is for one user, one gateway or one group" in refused.content.decode()
