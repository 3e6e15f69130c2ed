"""Spending limits (`chatapp/costs/spending_limits.py`): refused before anything is sent upstream on
every path that starts a generation, worst-case ceilings, the unknown-price policy, periods, the
hard stop mid-stream, and the spend pushed to the user's sockets when a cost settles."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection, transaction
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from chatapp import records_thread
from chatapp.asgi import application
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.turns import Answerer, TurnRequest, create_turn, first_context
from chatapp.costs import spending_limits, totals_check
from chatapp.costs.models import Generation, LedgerDay, SpendingLimit
from chatapp.costs.spending_limits import Ceiling, SpendingLimitReached, ceiling_for, period_bounds
from chatapp.gateways import catalog, configs, key_vault
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways.units import CostUnit, Money
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorURL
from tests.chatapp.conftest import UpstreamLog, start_turn
from tests.chatapp.read_aloud.test_read_aloud import (
    AsgiRequest,
    an_answer,
    read_aloud_url,
    session_headers,
)
from tests.chatapp.ws.test_consumers import receive, session_cookie
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
DEAR = Decimal("0.001")  # per token: a worst case that is easy to make large


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def default_gateway() -> Gateway:
    def find() -> Gateway:
        _, pk = configs.configs(force=True)
        return Gateway.objects.get(pk=pk)

    return await sync_to_async(find)()


async def priced(model: str, prompt: Decimal = DEAR, completion: Decimal = DEAR) -> Gateway:
    row = await default_gateway()
    await ModelPrice.objects.aupdate_or_create(
        gateway=row, model=model, defaults={"prompt": prompt, "completion": completion}
    )
    return row


async def limit(amount: str, **fields: Any) -> SpendingLimit:
    fields.setdefault("unit", CostUnit.USD)
    return await SpendingLimit.objects.acreate(amount=Decimal(amount), **fields)


async def spent(user: Any, amount: str, *, ago: datetime.timedelta | None = None) -> Generation:
    """A settled generation of `user`'s costing `amount` US dollars, `ago` before now."""
    row = await default_gateway()
    generation = await Generation.objects.acreate(
        user=user,
        gateway=row,
        model="emulator/chat",
        status=Generation.Status.COMPLETED,
        cost=Decimal(amount),
        cost_unit=CostUnit.USD,
        cost_source=Generation.CostSource.STREAM,
    )
    if ago is not None:
        when = timezone.now() - ago
        await Generation.objects.filter(pk=generation.pk).aupdate(started_at=when)
        await repaired()
    return generation


async def repaired() -> None:
    """The running totals set to the ledger's sums (as `reconcile_costs` does), after a test
    wrote the ledger behind their back (moved a generation in time, made a folded day)."""
    await sync_to_async(totals_check.check)()


async def open_socket(user: Any, conversation_pk: int) -> WebsocketCommunicator:
    """A page's socket, watching `conversation_pk`, through the real ASGI stack."""
    cookie = await sync_to_async(session_cookie)(user)
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"sessionid={cookie}".encode()),
    ]
    ws = WebsocketCommunicator(application, "/ws/chat/", headers)
    connected, _ = await ws.connect()
    assert connected
    await ws.send_json_to({"t": "watch", "c": conversation_pk})
    assert await receive(ws) == {"t": "watching", "c": conversation_pk}
    return ws


async def reserve(user_pk: int, gateway_pk: int, ceiling: Ceiling) -> Any:
    """`spending_limits.reserve` in a transaction of its own, as a turn calls it."""

    def run() -> Any:
        with transaction.atomic():
            return spending_limits.reserve(user_pk, gateway_pk, ceiling)

    return await sync_to_async(run)()


async def workers_done() -> None:
    while worker._tasks:
        await asyncio.wait_for(asyncio.wait(list(worker._tasks)), 30)


def refused(response: Any) -> str:
    assert response["HX-Retarget"] == "#composer-error"
    return str(response.content.decode().strip())


# --- Ceilings and periods -----------------------------------------------------------------------


async def test_the_ceiling_is_the_counted_prompt_and_the_budget_at_the_models_price() -> None:
    row = await priced("emulator/chat", Decimal("0.002"), Decimal("0.01"))
    messages = [{"role": "user", "content": "x" * 398}]  # with nothing joined: 100 tokens
    found = await sync_to_async(ceiling_for)(row.pk, "usd", "emulator/chat", messages, 300)
    assert (found.prompt_tokens, found.completion_tokens) == (100, 300)
    assert found.amount == Decimal("0.2") + Decimal("3")
    unset = await sync_to_async(ceiling_for)(row.pk, "usd", "emulator/chat?x=1", messages, None)
    assert unset.completion_tokens == spending_limits.DEFAULT_CEILING_TOKENS  # and its base price
    assert unset.amount == Decimal("0.2") + Decimal("0.01") * unset.completion_tokens
    unknown = await sync_to_async(ceiling_for)(row.pk, "usd", "emulator/other", messages, 300)
    assert unknown.amount is None
    assert unknown.unpriced == "no price is known for emulator/other"
    image = await sync_to_async(ceiling_for)(row.pk, "usd", "emulator/chat", messages, 1, "image")
    assert image.amount is None


def test_a_day_and_a_month_start_and_reset_in_the_servers_time_zone(settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Oslo"
    oslo = ZoneInfo("Europe/Oslo")
    now = datetime.datetime(2026, 12, 31, 23, 30, tzinfo=datetime.UTC)  # 00:30 on 1 Jan in Oslo
    day_start, day_reset = period_bounds("day", now)
    assert day_start == datetime.datetime(2027, 1, 1, tzinfo=oslo)
    assert day_reset == datetime.datetime(2027, 1, 2, tzinfo=oslo)
    month_start, month_reset = period_bounds("month", now)
    assert month_start == datetime.datetime(2027, 1, 1, tzinfo=oslo)
    assert month_reset == datetime.datetime(2027, 2, 1, tzinfo=oslo)
    assert period_bounds("month", datetime.datetime(2026, 12, 15, tzinfo=datetime.UTC)) == (
        datetime.datetime(2026, 12, 1, tzinfo=oslo),
        datetime.datetime(2027, 1, 1, tzinfo=oslo),
    )


async def test_yesterdays_spend_counts_for_the_month_but_not_for_the_day(alice: Any) -> None:
    await spent(alice, "0.5", ago=datetime.timedelta(days=1))
    day = await limit("1", user=alice, period=SpendingLimit.Period.DAY)
    month = await limit("1", user=alice, period=SpendingLimit.Period.MONTH)
    standings = await sync_to_async(spending_limits.standings_for)(alice)
    used = {state.limit.pk: state.used for state in standings}
    if timezone.localtime().day == 1:  # yesterday was last month
        assert used == {day.pk: 0, month.pk: 0}
    else:
        assert used == {day.pk: 0, month.pk: Decimal("0.5")}
    _, resets = period_bounds("day")
    assert resets - timezone.now() <= datetime.timedelta(days=1)


async def test_spend_folded_into_daily_totals_still_counts(alice: Any) -> None:
    whole, high, low = LedgerDay.cost_parts(Decimal("0.4"))
    await LedgerDay.objects.acreate(
        day=timezone.now().date(),
        user=alice,
        user_name="alice",
        model="emulator/chat",
        kind="chat",
        status="completed",
        cost_unit="usd",
        cost_source="stream",
        generations=3,
        priced=3,
        cost_whole=whole,
        cost_high=high,
        cost_low=low,
    )
    await repaired()
    await spent(alice, "0.1")
    await limit("1", user=alice)
    [state] = await sync_to_async(spending_limits.standings_for)(alice)
    assert state.used == Decimal("0.5")


async def test_a_cost_that_settles_while_a_limit_is_read_is_counted_not_lost(alice: Any) -> None:
    """The final write takes no limit lock: on PostgreSQL it can commit between the reads."""
    running = await Generation.objects.acreate(
        user=alice,
        gateway=await default_gateway(),
        model="emulator/chat",
        cost_source=Generation.CostSource.PENDING,
        spend_ceiling=Decimal("0.5"),
    )
    own = await limit("1", user=alice)

    def used_while_it_settles() -> Decimal:
        settled = False

        def settle_after_the_first_read(execute: Any, sql: str, *args: Any) -> Any:
            nonlocal settled
            result = execute(sql, *args)
            if not settled and "chatapp_generation" in sql:
                settled = True
                row = Generation.objects.get(pk=running.pk)  # settled as the records thread does
                row.status = Generation.Status.COMPLETED
                row.cost, row.cost_unit = Decimal("0.5"), CostUnit.USD
                row.cost_source = Generation.CostSource.STREAM
                row.save()  # and so added to the running totals
            return result

        with connection.execute_wrapper(settle_after_the_first_read):
            return spending_limits.standing(own, alice.pk).used

    assert await sync_to_async(used_while_it_settles)() >= Decimal("0.5")


async def test_the_admin_lists_each_limit_with_what_is_used_and_left(
    alice: Any, bob: Any, django_user_model: Any
) -> None:
    row = await default_gateway()
    await spent(alice, "0.25")
    await spent(bob, "0.5")
    await limit("1", user=alice)
    await limit("2")  # every user's: bob's is the most used
    admin = await django_user_model.objects.acreate_superuser("root", password="x")
    client = await logged_in(admin)
    html = (await client.get("/admin/chatapp/spendinglimit/")).content.decode()
    assert '<td class="field-used_so_far">$0.25</td>' in html
    assert '<td class="field-left">$0.75</td>' in html
    assert '<td class="field-used_so_far">$0.50 (bob, the most of any user)</td>' in html
    assert '<td class="field-left">$1.50</td>' in html
    both = {"user": alice.pk, "gateway": row.pk, "unit": "usd", "period": "month"}
    response = await client.post(
        "/admin/chatapp/spendinglimit/add/", {**both, "amount": "1", "unknown_price": "allow"}
    )
    assert "A limit is for one user, one gateway or one group, or (with none) every user" in (
        response.content.decode()
    )
    assert await SpendingLimit.objects.acount() == 2


# --- Refused before anything is sent ------------------------------------------------------------


async def test_a_send_over_the_limit_is_refused_in_words_and_nothing_goes_upstream(
    alice: Any, upstream: UpstreamLog
) -> None:
    await priced("emulator/chat")
    await spent(alice, "0.999")
    await limit("1", user=alice)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"), {"content": "Otters?", "model": "emulator/chat"}, headers=HTMX
    )
    _, resets = period_bounds("month")
    assert refused(response) == (
        "Even a short answer (64 tokens) to this conversation would cost about $0.066, more than "
        f"the $0.001 left of your spending limit of $1.00 a month; it resets on 1 {resets:%B} at "
        "00:00 UTC."
    )
    assert upstream.new() == []
    assert await Conversation.objects.acount() == 0
    assert await Generation.objects.acount() == 1  # the spend before, and no refused row


async def test_a_send_past_the_limit_is_cut_to_what_is_left_and_says_so(
    alice: Any, upstream: UpstreamLog
) -> None:
    """#45: with $0.25 of $1.00 left, an answer whose full budget (4,096 tokens) would cost more
    is not refused: it is asked for what the $0.25 pays, and its note says why it stopped."""
    await priced("emulator/long")
    await spent(alice, "0.75")
    await limit("1", user=alice)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"), {"content": "Otters?", "model": "emulator/long"}, headers=HTMX
    )
    assert response.get("HX-Retarget") != "#composer-error"
    record = await upstream.one(scenario="long")
    affordable = int((Decimal("0.25") - 2 * DEAR) / DEAR)  # "Otters?" is 2 tokens counted
    assert record.max_tokens == affordable == 248
    await upstream.finished(record)
    await workers_done()
    generation = await Generation.objects.select_related("message").aget(model="emulator/long")
    assert generation.finish_reason == "length"
    assert generation.max_tokens == 248
    assert generation.budget_capped_by == "your spending limit"
    page = (await client.get(reverse("chat:message", args=[generation.message_id]))).content
    assert (
        "The answer was cut off at the budget (248 tokens, all that your spending limit had "
        "left allowed)."
    ) in page.decode()


async def test_the_conversations_budget_is_its_ceiling_and_a_limit_with_room_starts_it(
    alice: Any, upstream: UpstreamLog
) -> None:
    await priced("emulator/chat")
    await limit("0.25", user=alice)
    conversation = await Conversation.objects.acreate(user=alice, max_tokens=100)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "Otters?", "model": "emulator/chat"},
        headers=HTMX,
    )
    assert "composer-error" not in response.get("HX-Retarget", "")
    record = await upstream.one(scenario="chat")
    generation = await Generation.objects.aget(conversation=conversation)
    assert generation.spend_ceiling == 2 * DEAR + 100 * DEAR
    await upstream.finished(record)
    await workers_done()


async def test_with_a_limit_and_no_budget_set_the_reserved_budget_goes_upstream(
    alice: Any, upstream: UpstreamLog
) -> None:
    await priced("emulator/chat")
    free = await start_turn(alice, "Otters?", "emulator/chat")
    worker.start(free.job)
    assert (await upstream.one(scenario="chat")).max_tokens is None, "no limit: none is sent"
    await workers_done()
    await limit("10", user=alice)

    started = await start_turn(alice, "Otters?", "emulator/chat")
    worker.start(started.job)

    (record,) = await eventually(lambda: upstream.new(scenario="chat")[1:], what="the second")
    assert record.max_tokens == spending_limits.DEFAULT_CEILING_TOKENS
    assert started.generation.max_tokens == spending_limits.DEFAULT_CEILING_TOKENS
    await upstream.finished(record)
    await workers_done()


async def test_every_way_of_starting_an_answer_is_checked(
    alice: Any, upstream: UpstreamLog
) -> None:
    await priced("emulator/echo")
    conversation = await Conversation.objects.acreate(user=alice, max_tokens=10)
    started = await start_turn(alice, "one", "emulator/echo", conversation.pk)
    worker.start(started.job)
    await workers_done()
    question = started.user_message
    assert question is not None
    await Generation.objects.filter(pk=started.generation.pk).aupdate(finish_reason="length")
    await limit("0", user=alice)  # less than the settled answer already cost
    before = len(upstream.new())
    client = await logged_in(alice)
    answer = started.assistant.pk
    for url, data in [
        (reverse("chat:send", args=[conversation.pk]), {"content": "two"}),
        (reverse("chat:retry", args=[answer]), {}),
        (reverse("chat:retry", args=[answer]), {"model": "emulator/echo"}),
        (reverse("chat:edit", args=[question.pk]), {"content": "uno"}),
        (reverse("chat:continue", args=[answer]), {}),
    ]:
        response = await client.post(url, {"model": "emulator/echo", **data}, headers=HTMX)
        text = refused(response)
        assert text.startswith("Your spending limit of $0.00 a month is used up; it resets on 1 ")
    assert len(upstream.new()) == before
    assert await Generation.objects.filter(conversation=conversation).acount() == 1


async def test_an_unknown_price_is_allowed_or_refused_as_the_limit_says(
    alice: Any, upstream: UpstreamLog, emulator_url: EmulatorURL
) -> None:
    # Osmexo's /models lists no prices (the emulator's Numes does, and they would be kept).
    osmexo = await Gateway.objects.acreate(
        name="Osmexo",
        base_url=f"{emulator_url}/osmexo/v1",
        dialect="osmexo",
        cost_unit="micro_usd",
        api_key_encrypted=key_vault.encrypt("osmexo-key"),
    )
    configs.forget_configs()
    policy = await limit(
        "1000000",
        user=alice,
        unit=CostUnit.MICRO_USD,
        unknown_price=SpendingLimit.UnknownPrice.REFUSE,
    )
    client = await logged_in(alice)
    data = {"content": "Otters?", "model": catalog.choice_value(osmexo.pk, "emulator/echo")}
    text = refused(await client.post(reverse("chat:send_new"), data, headers=HTMX))
    assert text.startswith(
        "This answer cannot be priced (no price is known for emulator/echo), and your spending "
        "limit of $1.00 a month refuses what it cannot price; $1.00 is left, and it resets on 1 "
    )
    assert upstream.new() == []
    policy.unknown_price = SpendingLimit.UnknownPrice.ALLOW
    await policy.asave()
    response = await client.post(reverse("chat:send_new"), data, headers=HTMX)
    assert "HX-Retarget" not in response or response["HX-Retarget"] != "#composer-error"
    await upstream.one(scenario="echo")
    generation = await Generation.objects.aget()
    assert generation.spend_ceiling is None  # nothing to reserve: its cost counts once settled
    await workers_done()
    await Generation.objects.filter(pk=generation.pk).aupdate(cost=1000000, cost_unit="micro_usd")
    await repaired()
    # Used up: even allowed, an unpriced answer waits for the reset.
    text = refused(await client.post(reverse("chat:send_new"), data, headers=HTMX))
    assert text.startswith("Your spending limit of $1.00 a month is used up")


async def test_a_limit_in_another_unit_or_on_another_gateway_does_not_count_this_one(
    alice: Any, bob: Any, upstream: UpstreamLog
) -> None:
    await priced("emulator/chat")
    other = await Gateway.objects.acreate(name="Other", base_url="http://127.0.0.1:9/v1")
    await limit("0", user=alice, unit=CostUnit.PNP)
    await limit("0", gateway=other)
    await limit("0", user=bob)
    started = await start_turn(alice, "Otters?", "emulator/chat")
    assert started.generation.spend_ceiling is None
    worker.start(started.job)
    await workers_done()


async def test_a_users_own_limit_replaces_the_default_and_a_gateways_counts_everyone(
    alice: Any, bob: Any
) -> None:
    row = await priced("emulator/chat")
    await limit("0", user=None)  # the default: nothing
    await limit("10", user=alice)
    await spent(bob, "0.01")
    ceiling = Ceiling(10, 10, CostUnit.USD, DEAR, DEAR)
    assert await reserve(alice.pk, row.pk, ceiling) is not None
    with pytest.raises(SpendingLimitReached, match=r"^Your spending limit of \$0\.00 a month"):
        await reserve(bob.pk, row.pk, ceiling)
    await SpendingLimit.objects.filter(user=None).adelete()
    await limit("0.02", gateway=row)  # bob's 0.01 counts against alice too
    with pytest.raises(SpendingLimitReached, match=f"left of the {row.name}'s spending limit of"):
        await reserve(alice.pk, row.pk, ceiling)


# --- Tool rounds, images, read alouds -----------------------------------------------------------


async def test_a_tool_round_is_checked_like_an_answer(alice: Any, upstream: UpstreamLog) -> None:
    model = "emulator/tools"
    row = await priced(model)
    conversation = await Conversation.objects.acreate(
        user=alice, tools=["calculator"], max_tokens=50
    )
    text = "What is six times seven?"
    first = await sync_to_async(ceiling_for)(row.pk, "usd", model, first_context(text), 50)
    assert first.amount is not None
    # Room for round 1's worst case exactly: round 2's context is longer and round 1 cost more
    # than nothing.
    await limit(str(first.amount), user=alice)
    started = await start_turn(alice, text, model, conversation.pk)
    worker.start(started.job)
    await workers_done()
    rows = [g async for g in Generation.objects.filter(conversation=conversation)]
    assert len(rows) == 1
    assert len(upstream.new(scenario="tools")) == 1
    assert rows[0].status == Generation.Status.COMPLETED
    assert rows[0].error_type == spending_limits.SPENDING_LIMIT
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    assert "The tools ran, but the turn stopped here: This answer could cost up to" in html


async def test_an_image_generation_is_checked_before_it_is_sent(
    alice: Any, upstream: UpstreamLog
) -> None:
    await limit("5", user=alice, unknown_price=SpendingLimit.UnknownPrice.REFUSE)
    owner = await worker.owner_channel()
    with pytest.raises(SpendingLimitReached, match=r"^This image generation cannot be priced"):
        await sync_to_async(create_turn)(
            alice,
            TurnRequest(
                text="a lighthouse",
                answerer=Answerer(model="emulator/image", kind=Generation.Kind.IMAGE),
            ),
            owner,
        )
    assert upstream.new() == []
    assert await Message.objects.acount() == 0


async def test_a_read_aloud_is_refused_unbilled_and_says_why(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, "emulator/audio")
    await limit("5", user=alice, unknown_price=SpendingLimit.UnknownPrice.REFUSE)
    request = (
        await AsgiRequest(read_aloud_url(answer), await session_headers(alice)).start().finish()
    )
    assert request.status == 409
    assert request.body.decode().startswith("This read aloud cannot be priced")
    assert upstream.new() == []
    read_aloud = await Generation.objects.aget(read_aloud=answer)
    assert read_aloud.cost_source == Generation.CostSource.NOT_BILLED
    client = await logged_in(alice)
    state = await client.get(reverse("chat:read_aloud_state", args=[answer.pk]))
    assert state.json()["error"].startswith("This read aloud cannot be priced")


# --- While it streams ---------------------------------------------------------------------------


async def test_an_answer_whose_cost_crosses_the_limit_is_stopped_there_upstream_too(
    alice: Any, upstream: UpstreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spending_limits, "DEFAULT_CEILING_TOKENS", 100)
    # 100 tokens a second: the stop comes at the tick after the crossing, and at 400 a slow
    # tick on a loaded machine let 345 tokens more through (PostgreSQL, in a full run).
    model = "emulator/long?long_tokens=4000&tokens_per_second=100"
    await priced("emulator/long", Decimal(0))
    await limit("0.3", user=alice)  # 300 tokens at a tenth of a cent
    started = await start_turn(alice, "Tell me everything.", model)
    assert started.generation.spend_ceiling == Decimal("0.1")
    # The reserved budget is sent as `max_tokens`; a gateway that ignores it is held here.
    worker.start(dataclasses.replace(started.job, max_tokens=None))
    record = await upstream.finished(await upstream.one(scenario="long"), within=20)
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    assert record.tokens_completion < 4000
    await workers_done()
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.status == Generation.Status.CANCELLED
    assert generation.error_type == spending_limits.SPENDING_LIMIT
    assert generation.message is not None
    shown = len(generation.message.content) / 4
    assert 200 < shown < 600  # stopped near its 300 tokens, once per tick
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    assert "Stopped: this answer reached your spending limit of $0.30 a month; it resets on" in html
    settled = await eventually(
        lambda: (
            Generation.objects.filter(pk=generation.pk)
            .exclude(cost_source=Generation.CostSource.PENDING)
            .afirst()
        ),
        what="the stopped answer's cost to settle",
        within=20,
    )
    assert settled.cost is not None


async def test_an_answer_whose_limits_were_deleted_runs_on_unwatched(
    alice: Any, upstream: UpstreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spending_limits, "DEFAULT_CEILING_TOKENS", 100)
    await priced("emulator/long", Decimal(0))
    own = await limit("0.3", user=alice)
    model = "emulator/long?long_tokens=600&tokens_per_second=2000"
    started = await start_turn(alice, "Tell me everything.", model)
    await own.adelete()
    # Past its 100 reserved tokens it asks its limits for more: there are none left.
    worker.start(dataclasses.replace(started.job, max_tokens=None))

    record = await upstream.finished(await upstream.one(scenario="long"), within=20)
    await workers_done()
    assert (record.final_outcome, record.cancelled_at) == ("completed", None)
    generation = await Generation.objects.aget(pk=started.generation.pk)
    assert (generation.status, generation.error_type) == (Generation.Status.COMPLETED, "")


async def test_twenty_reservations_at_once_start_only_what_the_limit_allows(alice: Any) -> None:
    """On one process the records thread runs turns one at a time; `tests/multiprocess` has the
    same over two servers on PostgreSQL."""
    await priced("emulator/echo")
    conversations = [
        await Conversation.objects.acreate(user=alice, max_tokens=98) for _ in range(20)
    ]
    one = DEAR + 98 * DEAR  # "hi" is one token: 0.099 each
    await limit(str(5 * one + one / 2), user=alice)
    owner = await worker.owner_channel()
    results = await asyncio.gather(
        *(
            records_thread.on_record_thread(
                create_turn,
                alice,
                TurnRequest(
                    text="hi", answerer=Answerer(model="emulator/echo"), conversation_pk=c.pk
                ),
                owner,
            )
            for c in conversations
        ),
        return_exceptions=True,
    )
    started = [r for r in results if not isinstance(r, BaseException)]
    assert all(isinstance(r, SpendingLimitReached) for r in results if r not in started)
    assert len(started) == 5
    assert await Generation.objects.acount() == 5


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has one writer at a time")
async def test_a_second_check_of_a_limit_waits_for_the_first_to_commit(alice: Any) -> None:
    """The limit rows are locked: a check that starts while another's turn is uncommitted waits
    for it, then sees its reservation (run on PostgreSQL by `tests/multiprocess/suite.py`)."""
    row = await priced("emulator/chat")
    ceiling = Ceiling(1, 1, CostUnit.USD, DEAR, DEAR)
    await limit("0.003", user=alice)  # room for one worst case of 0.002
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
                return spending_limits.reserve(alice.pk, row.pk, ceiling)
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
            connection.close()  # a thread of the loop's executor: its connection goes with it

    holding = asyncio.ensure_future(asyncio.to_thread(first))
    await eventually(reserved.is_set, what="the first reservation")
    checking = asyncio.ensure_future(asyncio.to_thread(second))
    try:
        await eventually(
            lambda: asyncio.to_thread(waiting_on_a_lock),
            what="the second check to wait on the limit's lock",
        )
        assert not checking.done()
    finally:
        release.set()
        await holding
    assert isinstance(await checking, SpendingLimitReached)


# --- The spend, live ----------------------------------------------------------------------------


async def test_a_settled_cost_pushes_the_new_spend_to_every_socket_of_its_user(
    alice: Any, bob: Any
) -> None:
    await priced("emulator/echo")
    await limit("1", user=alice)
    await spent(alice, "0.8")
    conversation = await Conversation.objects.acreate(user=alice, max_tokens=1)
    other = await Conversation.objects.acreate(user=alice)
    elsewhere = await open_socket(alice, other.pk)  # a tab showing another conversation
    bobs = await open_socket(bob, (await Conversation.objects.acreate(user=bob)).pk)
    started = await start_turn(alice, "hi", "emulator/echo", conversation.pk)
    worker.start(started.job)
    pushed = await receive(elsewhere)
    assert pushed["t"] == "spend"
    settled = await Generation.objects.aget(pk=started.generation.pk)
    assert settled.cost is not None
    html = pushed["html"]
    assert '<div id="sidebar-spend"' in html
    assert 'id="limit-warning"' in html
    left = Money(Decimal(1) - Decimal("0.8") - settled.cost, CostUnit.USD).rounded()
    assert f'<p class="limit-left near">{left} of $1.00 left this month</p>' in html
    assert f"You have used 80% of your spending limit this month: {left} left; it resets" in html
    assert await bobs.receive_nothing(timeout=0.5)
    await workers_done()
    assert await elsewhere.receive_nothing(timeout=0.5)  # one message for the cost, none per token
    await elsewhere.disconnect()
    await bobs.disconnect()


async def test_costs_settling_together_push_the_spend_once_and_a_later_one_again(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crowd of answers ending at once is one render of the month's figures per user, not one
    per answer: every cost settled while a push waits is in it, and a cost settled after it
    started gets a push of its own."""
    from chatapp.costs import spend_push

    renders: list[int] = []
    render = spend_push.render_spend

    def counted(user_pk: int) -> str | None:
        renders.append(user_pk)
        return render(user_pk)

    monkeypatch.setattr(spend_push, "render_spend", counted)
    monkeypatch.setattr(spend_push, "PUSH_INTERVAL", 0.5)
    await limit("1", user=alice)
    socket = await open_socket(alice, (await Conversation.objects.acreate(user=alice)).pk)
    await spend_push.cost_settled(alice.pk)  # the first goes at once
    assert (await receive(socket))["t"] == "spend"
    await spent(alice, "0.5")
    # Ten costs settling within the interval after it: one push, after the interval, covering all.
    await asyncio.gather(*(spend_push.cost_settled(alice.pk) for _ in range(10)))
    pushed = await receive(socket)
    assert pushed["t"] == "spend"
    assert "$0.50" in pushed["html"]
    assert renders == [alice.pk, alice.pk]
    assert await socket.receive_nothing(timeout=0.6)
    await spent(alice, "0.25")
    await spend_push.cost_settled(alice.pk)  # after the interval: its own push
    assert "$0.75" in (await receive(socket))["html"]
    assert renders == [alice.pk] * 3
    await socket.disconnect()


async def test_a_spend_push_the_database_cannot_read_is_one_warning_with_no_traceback(
    alice: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A push waits out its interval, so it can fall inside a database outage: an infrastructure
    condition said in one line (the next settle or a reload shows the spend), not an error."""
    from django.db import OperationalError

    from chatapp.costs import spend_push

    def away(user_pk: int) -> str | None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(spend_push, "render_spend", away)
    await spend_push.cost_settled(alice.pk)
    pushed = [r for r in caplog.records if r.name == "chatapp.costs.spend_push"]
    assert [(r.levelname, r.exc_info) for r in pushed] == [("WARNING", None)]
    assert "server closed the connection" in pushed[0].getMessage()
