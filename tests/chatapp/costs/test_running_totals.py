"""The running totals (`running_totals`, #46): kept in step with the ledger as costs settle, by
every path that settles one, equal to the admin's exact sums, checked and repaired by
`reconcile_costs`, and read in the same few statements whatever the history."""

from __future__ import annotations

import datetime
import io
import threading
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection, connections
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chatapp.conversations.jobs import JobEnd, Status
from chatapp.conversations.models import Conversation, Message
from chatapp.costs import ledger, spend_push, totals_check
from chatapp.costs.costing import Lookup, settle_cost_now
from chatapp.costs.models import Generation, GenerationGroup, LedgerDay, SpendingLimit, SpendTotal
from chatapp.costs.spend import month_spend
from chatapp.costs.summary import totals
from chatapp.gateways.models import Gateway
from chatapp.streaming import persistence
from chatapp.streaming.live_state import LiveState
from gateway_client.accumulator import Completion
from gateway_client.errors import ErrorInfo
from gateway_client.events import Cost

# The functions the records thread runs, called here on the test's own thread.
save_final = persistence.save_final.__wrapped__  # type: ignore[attr-defined]


@pytest.fixture
def numes(db: None) -> Gateway:
    return Gateway.objects.create(
        name="Numes", base_url="https://n.example", cost_unit="usd", dialect="numes"
    )


@pytest.fixture
def nodul(db: None) -> Gateway:
    return Gateway.objects.create(
        name="Nodul", base_url="https://d.example", cost_unit="pnp", dialect="nodul"
    )


def streaming(user: Any, gateway: Gateway | None, conversation: Conversation | None = None) -> int:
    conversation = conversation or Conversation.objects.create(user=user, gateway=gateway)
    message = Message.objects.create(conversation=conversation, role="assistant")
    return Generation.objects.create(
        message=message, conversation=conversation, gateway=gateway, model="numes/a"
    ).pk


def settled_by_stream(pk: int, amount: float, unit: str = "credits") -> None:
    completion = Completion(
        outcome="complete", content="ok", generation_id=f"gen-{pk}", cost=Cost(amount, unit, False)
    )
    save_final(pk, LiveState(), JobEnd(Status.COMPLETED, completion=completion), 5, None)


def refused(pk: int) -> None:
    end = JobEnd(Status.FAILED, ErrorInfo(429, "rate_limited", None, "slow down"))
    save_final(pk, LiveState(), end, None, None)


def pending_then_given_up(pk: int) -> None:
    """Ended without a cost; no record is kept: an estimate, or the reason there is none."""
    completion = Completion(outcome="complete", content="four chars", generation_id=f"g{pk}")
    save_final(pk, LiveState(), JobEnd(Status.COMPLETED, completion=completion), 5, None)
    assert Generation.objects.get(pk=pk).cost_source == Generation.CostSource.PENDING
    settle_cost_now(pk, Lookup(expected=False))


def by_unit(rows: Any) -> dict[str, Decimal]:
    return {total.unit.value: total.amount for total in rows.totals}


def kept_by_unit(scope: str, key: int, period: str = "month") -> dict[str, Decimal]:
    found: dict[str, Decimal] = {}
    for row in SpendTotal.objects.filter(scope=scope, scope_key=key, period=period):
        if row.priced:
            found[row.unit] = found.get(row.unit, Decimal(0)) + row.amount
    return found


def a_mix(alice: Any, bob: Any, numes: Gateway, nodul: Gateway) -> Group:
    """Costs settled by every path: a stream's (credits and micro-dollars), a refusal not billed,
    an estimate and an unavailable one after pending, a read aloud refused; alice in a group."""
    group = Group.objects.create(name="Interns")
    alice.groups.add(group)
    for amount in (0.0070244, 0.25, 1e-15, 12.5):
        settled_by_stream(streaming(alice, numes), amount)
    settled_by_stream(streaming(alice, numes), 167, "micro_usd")
    settled_by_stream(streaming(bob, numes), 0.0000081)
    settled_by_stream(streaming(bob, nodul), 0.0003219)
    refused(streaming(alice, numes))
    pending_then_given_up(streaming(alice, nodul))  # Nodul has no price: unavailable
    Generation.objects.create(
        user=alice,
        gateway=numes,
        model="numes/speech",
        kind=Generation.Kind.READ_ALOUD,
        status=Generation.Status.FAILED,
        cost_source=Generation.CostSource.NOT_BILLED,
    )
    streaming(alice, numes)  # still running: in no total
    return group


def test_every_settle_keeps_the_totals_equal_to_the_ledgers_exact_sums(
    alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    group = a_mix(alice, bob, numes, nodul)

    assert totals_check.check(repair=False) == []
    settled = Generation.objects.exclude(cost_source=Generation.CostSource.PENDING)
    for user in (alice, bob):
        assert kept_by_unit("user", user.pk) == by_unit(totals(settled.filter(user=user)))
        assert kept_by_unit("user", user.pk, "day") == by_unit(totals(settled.filter(user=user)))
    for gateway in (numes, nodul):
        assert kept_by_unit("gateway", gateway.pk) == by_unit(
            totals(settled.filter(gateway=gateway))
        )
    in_group = settled.filter(group_links__group=group)
    assert kept_by_unit("group", group.pk) == by_unit(totals(in_group))
    assert kept_by_unit("user", alice.pk) == {
        "usd": Decimal("12.757024400000001"),  # Numes bills its credits in US dollars
        "micro_usd": Decimal(167),
    }
    counts = SpendTotal.objects.filter(scope="user", scope_key=alice.pk, period="month")
    assert sorted((row.unit, row.priced, row.unpriced, row.not_billed) for row in counts) == [
        ("", 0, 0, 2),  # the refusal and the read aloud: not billed, on Numes
        ("", 0, 1, 0),  # the answer on Nodul, which has no price
        ("micro_usd", 1, 0, 0),
        ("usd", 4, 0, 0),
    ]


def test_the_migrations_rebuild_makes_the_totals_the_ledgers(
    alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    a_mix(alice, bob, numes, nodul)
    SpendTotal.objects.all().delete()  # derived rows, not money facts

    totals_check.rebuild(django_apps, None)

    assert SpendTotal.objects.exists()
    assert totals_check.check(repair=False) == []


def test_folding_leaves_the_totals_equal_to_the_ledger(
    alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    a_mix(alice, bob, numes, nodul)
    before = sorted(SpendTotal.objects.values_list(*[f.name for f in SpendTotal._meta.fields][1:]))

    ledger.fold(timezone.now().date() + datetime.timedelta(days=1))

    assert LedgerDay.objects.exists()
    assert totals_check.check(repair=False) == []
    after = sorted(SpendTotal.objects.values_list(*[f.name for f in SpendTotal._meta.fields][1:]))
    assert after == before


def test_reconcile_costs_finds_and_repairs_a_drifted_total(
    alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    a_mix(alice, bob, numes, nodul)
    drifted = SpendTotal.objects.filter(scope="gateway", scope_key=numes.pk, unit="usd")
    drifted.update(cost_whole=F("cost_whole") + 3, priced=F("priced") - 1)
    SpendTotal.objects.filter(scope="user", scope_key=bob.pk, period="day", unit="pnp").delete()

    out = io.StringIO()
    call_command("reconcile_costs", "--dry-run", stdout=out)
    assert "3 running total(s) differed from the ledger; would be repaired." in out.getvalue()
    assert len(totals_check.check(repair=False)) == 3

    out = io.StringIO()
    call_command("reconcile_costs", stdout=out)
    said = out.getvalue()
    assert f"running total gateway {numes.pk}, month of " in said
    assert "kept 15.757032500000001 (4 priced" in said
    assert "the ledger says 12.757032500000001 (5 priced" in said
    assert f"running total user {bob.pk}, day of " in said
    assert "3 running total(s) differed from the ledger; repaired." in said
    assert totals_check.check(repair=False) == []
    call_command("reconcile_costs", stdout=(out := io.StringIO()))
    assert "The running totals match the ledger." in out.getvalue()


# --- Constant in the history --------------------------------------------------------------------


def history(user: Any, gateway: Gateway, generations: int, conversations: int) -> None:
    """`conversations` conversations holding `generations` settled answers of this month, written
    in bulk (with their groups), and the totals rebuilt from them."""
    made = Conversation.objects.bulk_create(
        Conversation(user=user, gateway=gateway, title=f"c{n}") for n in range(conversations)
    )
    rows = Generation.objects.bulk_create(
        Generation(
            user=user,
            conversation=made[n % conversations],
            gateway=gateway,
            model="numes/a",
            status=Generation.Status.COMPLETED,
            cost=Decimal("0.001"),
            cost_unit="usd",
            cost_source=Generation.CostSource.STREAM,
        )
        for n in range(generations)
    )
    GenerationGroup.objects.bulk_create(
        GenerationGroup(generation=row, group=group, group_name=group.name)
        for row in rows
        for group in user.groups.all()
    )
    totals_check.check()


def with_limits(user: Any, gateway: Gateway) -> None:
    group = Group.objects.create(name="Interns")
    user.groups.add(group)
    SpendingLimit.objects.create(user=user, unit="usd", amount=Decimal(100))
    SpendingLimit.objects.create(group=group, unit="usd", amount=Decimal(500), period="day")
    SpendingLimit.objects.create(gateway=gateway, unit="usd", amount=Decimal(900))


def statements(call: Any) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        call()
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize("size", [10, 1000])
def test_the_spend_line_and_limits_read_the_same_statements_whatever_the_history(
    alice: Any, numes: Gateway, size: int, django_assert_max_num_queries: Any
) -> None:
    with_limits(alice, numes)
    history(alice, numes, generations=size, conversations=max(1, size // 10))

    with django_assert_max_num_queries(4):  # the user's limits, the reservations, the totals
        context = spend_push.spend_context(alice)
    sql = statements(lambda: spend_push.spend_context(alice))
    assert not any(
        "chatapp_generation" in s and "SUM" in s and "spend_ceiling" not in s for s in sql
    )
    assert context["month_spend"].dollars.amount == Decimal("0.001") * size
    assert [state.used for state in context["spend_limits"]] == [Decimal("0.001") * size] * 3


def test_the_spend_line_is_the_same_statements_at_10_and_1000_generations(
    alice: Any, numes: Gateway
) -> None:
    with_limits(alice, numes)
    history(alice, numes, generations=10, conversations=1)
    small = statements(lambda: spend_push.spend_context(alice))
    history(alice, numes, generations=990, conversations=100)
    large = statements(lambda: spend_push.spend_context(alice))
    assert len(small) == len(large)
    assert month_spend(alice).dollars is not None


@pytest.mark.django_db(transaction=True)  # its transaction is the settle's own, as in production
@pytest.mark.parametrize("conversations", [10, 1000])
def test_settling_an_answer_is_at_most_six_statements(
    alice: Any, numes: Gateway, conversations: int
) -> None:
    with_limits(alice, numes)
    history(alice, numes, generations=conversations, conversations=conversations)
    pk = streaming(alice, numes, Conversation.objects.filter(user=alice).first())
    completion = Completion(
        outcome="complete", content="ok", generation_id="gen-x", cost=Cost(0.5, "credits", False)
    )
    end = JobEnd(Status.COMPLETED, completion=completion)

    sql = statements(lambda: save_final(pk, LiveState(), end, 5, None))

    # The answer read (locked), written, its conversation touched, and its totals: transaction
    # control (BEGIN IMMEDIATE, COMMIT) aside, whatever the history.
    work = [s for s in sql if not s.startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))]
    assert len(work) <= 6, "\n".join(work)
    assert sum("spendtotal" in s for s in work) == 1, "one upsert for every total"
    assert totals_check.check(repair=False) == []


# --- Concurrency --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_settles_at_once_on_several_connections_all_count(alice: Any, numes: Gateway) -> None:
    """Each thread has its own connection: on PostgreSQL (the multi-process suite) the upserts
    race for real; on SQLite they take turns for the write lock."""
    Group.objects.create(name="Interns").user_set.add(alice)
    pks = [streaming(alice, numes) for _ in range(16)]
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def settle(mine: list[int]) -> None:
        try:
            start.wait()
            for pk in mine:
                settled_by_stream(pk, 0.125)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=settle, args=(pks[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert totals_check.check(repair=False) == []
    for scope, key in (("user", alice.pk), ("gateway", numes.pk)):
        assert kept_by_unit(scope, key) == {"usd": Decimal(2)}
    row = SpendTotal.objects.get(scope="group", period="day")
    assert (row.priced, row.amount) == (16, Decimal(2))
