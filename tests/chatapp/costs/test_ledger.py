"""The cost ledger is append-only: deleting a conversation or a user keeps every generation and
its cost, nothing deletes a generation but `fold_ledger`, and folding changes no total."""

from __future__ import annotations

import csv
import datetime
import io
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from chatapp.access.rate_limits import RateLimited, check_generation_start
from chatapp.conversations.models import Conversation, Message
from chatapp.costs import csv_file, ledger
from chatapp.costs.models import Generation, LedgerDay
from chatapp.costs.spend import SpendLine, month_spend
from chatapp.costs.summary import CostSummary, GroupTotals
from chatapp.errors import ChatAppError, LedgerIsAppendOnly
from chatapp.gateways.models import Gateway
from chatapp.read_aloud.models import ReadAloudAudio

pytestmark = pytest.mark.django_db

SUMMARY = "admin:chatapp_generation_summary"
EXPORT = "admin:chatapp_generation_export"
CHANGELIST = "admin:chatapp_generation_changelist"
NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
TODAY = NOW.date()


def generation(
    user: Any,
    gateway: Gateway | None,
    *,
    days_ago: float = 1,
    cost: str | None = "0.5",
    unit: str = "usd",
    source: str = "stream",
    status: str = "completed",
    model: str = "numes/a",
    kind: str = "chat",
    conversation: Conversation | None = None,
    started: datetime.datetime | None = None,
) -> Generation:
    """A finished generation `days_ago` days before the module was imported, or at `started`."""
    conversation = conversation or Conversation.objects.create(user=user, gateway=gateway)
    message = Message.objects.create(conversation=conversation, role="assistant", content="ok")
    row = Generation.objects.create(
        message=message,
        conversation=conversation,
        gateway=gateway,
        model=model,
        kind=kind,
        status=status,
        upstream_id=f"gen-{message.pk}",
        prompt_tokens=10,
        completion_tokens=5,
        reasoning_tokens=2,
        cost=None if cost is None else Decimal(cost),
        cost_unit="" if cost is None else unit,
        cost_source=source,
    )
    started = started or NOW - datetime.timedelta(days=days_ago)
    Generation.objects.filter(pk=row.pk).update(started_at=started, finished_at=started)
    row.refresh_from_db()
    return row


@pytest.fixture
def numes(db: None) -> Gateway:
    return Gateway.objects.create(name="Numes", base_url="https://n.example", cost_unit="usd")


@pytest.fixture
def nodul(db: None) -> Gateway:
    return Gateway.objects.create(name="Nodul", base_url="https://d.example", cost_unit="pnp")


@pytest.fixture
def admin(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def amounts(totals: GroupTotals) -> dict[str, Decimal]:
    return {total.unit.value: total.amount for total in totals.totals}


def line_amounts(line: SpendLine) -> dict[str, Decimal]:
    """A spend line's amounts: its dollars, and each other unit's."""
    found = {other.money.unit.value: other.money.amount for other in line.others}
    return found | ({"usd": line.dollars.amount} if line.dollars else {})


# --- Deleting conversations and users ---------------------------------------------------------


def test_deleting_conversations_keeps_their_generations_and_the_months_spend(
    alice: Any, numes: Gateway, password: str
) -> None:
    conversations = [Conversation.objects.create(user=alice, gateway=numes) for _ in range(2)]
    for conversation in conversations:
        for cost in ("0.25", "0.0001708", "3"):
            generation(alice, numes, days_ago=0, cost=cost, conversation=conversation)
    client = Client()
    client.force_login(alice)
    before = month_spend(alice)
    page = client.get(reverse("chat:home")).content.decode()
    assert 'Your spend this month: <span class="amount">$6.50</span>' in page

    for conversation in conversations:
        response = client.post(reverse("chat:delete", args=[conversation.pk]))
        assert response.status_code == 302

    assert not Conversation.objects.exists()
    assert not Message.objects.exists(), "the text goes with the conversation"
    kept = Generation.objects.all()
    assert kept.count() == 6
    assert {(g.user_id, g.user_name, g.conversation_id, g.message_id) for g in kept} == {
        (alice.pk, "alice", None, None)
    }
    assert month_spend(alice) == before
    assert line_amounts(before) == {"usd": Decimal("6.5003416")}
    assert "$6.50</span>" in client.get(reverse("chat:home")).content.decode()


def test_deleting_a_user_keeps_their_costs_under_their_name(
    admin: Client, alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    generation(alice, numes, cost="0.5")
    generation(bob, numes, cost="0.25")
    generation(bob, nodul, cost="3", unit="pnp")
    before = admin.get(reverse(SUMMARY)).context["summary"]

    bob.delete()

    assert Generation.objects.count() == 3
    after = admin.get(reverse(SUMMARY)).context["summary"]
    assert after.overall == before.overall
    assert {g.label: amounts(g) for g in after.users} == {
        "alice": {"usd": Decimal("0.5")},
        "bob (deleted)": {"usd": Decimal("0.25"), "pnp": Decimal("3")},
    }
    # The per-user table links to the deleted user's rows, and the list shows the kept name.
    listed = admin.get(reverse(CHANGELIST), {"user_name": "bob"})
    assert listed.context["cl"].result_count == 2
    assert amounts(listed.context["cost_totals"]) == {"usd": Decimal("0.25"), "pnp": Decimal("3")}
    assert "bob (deleted)" in listed.content.decode()
    assert "user_name=bob" in admin.get(reverse(SUMMARY)).content.decode()


def test_a_generation_keeps_its_owner_from_its_conversation(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    row = Generation.objects.create(conversation=conversation, model="m")
    assert (row.user_id, row.user_name) == (alice.pk, "alice")


def test_the_ledger_refuses_to_delete_a_generation(alice: Any, numes: Gateway) -> None:
    row = generation(alice, numes)

    with pytest.raises(LedgerIsAppendOnly) as refused:
        row.delete()
    with pytest.raises(LedgerIsAppendOnly):
        Generation.objects.filter(pk=row.pk).delete()
    with pytest.raises(ChatAppError):
        Generation.objects.all().delete()

    assert Generation.objects.filter(pk=row.pk).exists()
    assert "fold_ledger" in str(refused.value)


def test_a_read_aloud_outlives_its_answer_and_its_audio_goes_with_it(
    alice: Any, numes: Gateway
) -> None:
    answer = generation(alice, numes)
    read_aloud = Generation.objects.create(
        kind="speech", read_aloud=answer.message, conversation=answer.conversation, model="tts"
    )
    ReadAloudAudio.objects.create(generation=read_aloud, media_type="audio/mpeg", data=b"x")

    Conversation.objects.filter(pk=answer.conversation_id).delete()

    read_aloud.refresh_from_db()
    assert (read_aloud.read_aloud_id, read_aloud.user_id) == (None, alice.pk)
    assert not ReadAloudAudio.objects.exists(), "the audio is the answer's text, read aloud"


# --- Folding ----------------------------------------------------------------------------------


def _history(alice: Any, bob: Any, numes: Gateway, nodul: Gateway) -> None:
    """Generations over three weeks: users, gateways (and none), units, sources, magnitudes."""
    for days_ago, cost in ((20, "0.5"), (20, "123456.123456789"), (9, "0.0000081"), (2, "7")):
        generation(alice, numes, days_ago=days_ago, cost=cost)
    generation(alice, numes, days_ago=20, cost="0.25", source="estimate", model="numes/b")
    generation(alice, numes, days_ago=15, cost=None, source="pending", status="failed")
    generation(alice, None, days_ago=15, cost="1", model="old")
    generation(bob, nodul, days_ago=12, cost="0.000000000001", unit="pnp", model="nodul/x")
    generation(bob, nodul, days_ago=12, cost="3.3", unit="pnp", model="nodul/x", kind="image")
    generation(bob, numes, days_ago=11, cost=None, source="unavailable", status="cancelled")
    generation(bob, numes, days_ago=3, cost="130", unit="micro_usd", model="osmexo/m")
    generation(bob, numes, days_ago=11, cost=None, source="pending", status="streaming")


def _csv_sums(response: Any) -> tuple[Counter[str], dict[str, Decimal], int]:
    text = b"".join(response.streaming_content).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    counts: Counter[str] = Counter()
    costs: dict[str, Decimal] = defaultdict(Decimal)
    tokens = 0
    for row in rows:
        counts[row["cost_source"]] += int(row["generations"])
        if row["cost"]:
            costs[row["cost_unit"]] += Decimal(row["cost"])
        tokens += int(row["prompt_tokens"] or 0) + int(row["completion_tokens"] or 0)
    return counts, dict(costs), tokens


def _comparable(summary: CostSummary) -> tuple[Any, ...]:
    return (
        summary.overall,
        summary.days,
        summary.models,
        summary.users,
        summary.gateways,
        summary.sources,
        sorted(summary.daily, key=lambda bar: (bar.day, bar.unit, bar.series)),
    )


# Every filter of the list, as its links give it (a generation ID is gone once folded).
FILTERS: list[dict[str, str]] = [
    {},
    {"gateway__id__exact": "nodul"},
    {"gateway__isnull": "True"},
    {"user__id__exact": "bob"},
    {"model": "numes/b"},
    {"kind__exact": "image"},
    {"status__exact": "failed"},
    {"cost_source__exact": "pending"},
    {"cost_source__exact": "estimate", "gateway__id__exact": "numes"},
    {"cost_unit__exact": "pnp"},
    {"q": "bo"},
    {"started_from": "days_ago:14", "started_to": "days_ago:9"},
]


def _resolved(params: dict[str, str], ids: dict[str, str]) -> dict[str, str]:
    resolved = {}
    for name, value in params.items():
        if value.startswith("days_ago:"):
            value = (TODAY - datetime.timedelta(days=int(value[9:]))).isoformat()
        resolved[name] = ids.get(value, value)
    return resolved


def _everything(admin: Client, params: dict[str, str], users: list[Any]) -> tuple[Any, ...]:
    listed = admin.get(reverse(CHANGELIST), params).context["cost_totals"]
    summary = admin.get(reverse(SUMMARY), {"started_from": "2000-01-01", **params})
    summary_by_model = admin.get(
        reverse(SUMMARY), {"started_from": "2000-01-01", "series": "model", **params}
    )
    exported = _csv_sums(admin.get(reverse(EXPORT), params))
    months = [month_spend(user) for user in users]
    return (
        listed,
        _comparable(summary.context["summary"]),
        _comparable(summary_by_model.context["summary"]),
        exported,
        months,
    )


@pytest.mark.parametrize("params", FILTERS, ids=["+".join(sorted(f)) or "all" for f in FILTERS])
def test_folding_changes_no_total(
    admin: Client, alice: Any, bob: Any, numes: Gateway, nodul: Gateway, params: dict[str, str]
) -> None:
    _history(alice, bob, numes, nodul)
    ids = {"numes": str(numes.pk), "nodul": str(nodul.pk), "bob": str(bob.pk)}
    query = _resolved(params, ids)
    before = _everything(admin, query, [alice, bob])

    report = ledger.fold(TODAY - datetime.timedelta(days=5))

    assert report.generations == 8, "all but the streaming, the pending and the last five days'"
    assert report.pending == 1
    assert Generation.objects.count() == 4
    assert LedgerDay.objects.count() == report.daily_totals < report.generations
    assert _everything(admin, query, [alice, bob]) == before


def test_folding_within_this_month_keeps_the_sidebars_spend(
    alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    for cost in ("0.1", "0.0000081", "12.5"):
        generation(alice, numes, days_ago=0, cost=cost)
    generation(bob, nodul, days_ago=0, cost="2", unit="pnp")
    before = [month_spend(alice), month_spend(bob)]

    ledger.fold(TODAY + datetime.timedelta(days=1))

    assert not Generation.objects.exists()
    assert [month_spend(alice), month_spend(bob)] == before
    assert line_amounts(before[0]) == {"usd": Decimal("12.6000081")}


def test_a_deleted_users_folded_rows_keep_their_name(
    admin: Client, alice: Any, bob: Any, numes: Gateway
) -> None:
    generation(bob, numes, days_ago=10, cost="0.25")
    ledger.fold(TODAY)
    bob.delete()

    (day,) = LedgerDay.objects.all()
    assert (day.user_id, day.user_name, day.cost) == (None, "bob", Decimal("0.25"))
    users = admin.get(reverse(SUMMARY), {"started_from": "2000-01-01"}).context["summary"].users
    assert [(g.label, amounts(g)) for g in users] == [("bob (deleted)", {"usd": Decimal("0.25")})]


def test_folded_amounts_are_exact_at_every_magnitude() -> None:
    for text in ("0", "0.000000000000001", "0.999999999999999", "123456789012345.123456789012345"):
        amount = Decimal(text)
        whole, high, low = LedgerDay.cost_parts(amount)
        day = LedgerDay(cost_whole=whole, cost_high=high, cost_low=low)
        assert day.cost == amount
        assert 0 <= high < 10**7
        assert 0 <= low < 10**8


def test_the_command_folds_and_a_dry_run_changes_nothing(
    alice: Any, numes: Gateway, nodul: Gateway
) -> None:
    generation(alice, numes, days_ago=10, cost="0.5")
    generation(alice, numes, days_ago=9, cost="0.25")
    generation(alice, nodul, days_ago=9, cost="2", unit="pnp")
    generation(alice, numes, days_ago=1, cost="1")
    cutoff = (TODAY - datetime.timedelta(days=5)).isoformat()
    first = (TODAY - datetime.timedelta(days=10)).isoformat()
    last = (TODAY - datetime.timedelta(days=9)).isoformat()

    out = io.StringIO()
    call_command("fold_ledger", "--before", cutoff, "--dry-run", stdout=out)
    assert out.getvalue() == (
        f"Would fold 3 generation(s) from {first} to {last} into 3 daily total(s):\n"
        "  1 generation(s), 2 PnP\n"
        "  2 generation(s), $0.75\n"
    )
    assert Generation.objects.count() == 4
    assert not LedgerDay.objects.exists()

    out = io.StringIO()
    call_command("fold_ledger", "--before", cutoff, stdout=out)
    assert out.getvalue().startswith("Folded 3 generation(s)")
    assert Generation.objects.count() == 1
    assert LedgerDay.objects.count() == 3

    out = io.StringIO()
    call_command("fold_ledger", "--before", cutoff, stdout=out)
    assert out.getvalue() == f"No finished generations started before {cutoff}.\n"


def test_a_pending_cost_is_left_unfolded_and_counts_once_it_settles(
    alice: Any, numes: Gateway
) -> None:
    generation(alice, numes, days_ago=10, cost="0.5")
    pending = generation(alice, numes, days_ago=10, cost=None, source="pending", status="failed")
    cutoff = (TODAY - datetime.timedelta(days=5)).isoformat()

    out = io.StringIO()
    call_command("fold_ledger", "--before", cutoff, stdout=out)

    assert out.getvalue().endswith(
        "Left 1 generation(s) whose cost is still pending, for a later run.\n"
    )
    assert list(Generation.objects.values_list("pk", flat=True)) == [pending.pk]
    Generation.objects.filter(pk=pending.pk).update(
        cost=Decimal("0.25"), cost_unit="usd", cost_source="record"
    )
    call_command("fold_ledger", "--before", cutoff, stdout=io.StringIO())
    assert not Generation.objects.exists()
    assert sum(day.cost for day in LedgerDay.objects.all()) == Decimal("0.75")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yesterday", "--before: 'yesterday' is not a day (YYYY-MM-DD)"),
        (
            (TODAY + datetime.timedelta(days=1)).isoformat(),
            f"--before {TODAY + datetime.timedelta(days=1)} is in the future; "
            f"today (UTC) is {TODAY}",
        ),
    ],
)
def test_the_command_refuses_a_day_it_cannot_mean(value: str, message: str) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("fold_ledger", "--before", value)
    assert str(refused.value) == message


def test_the_csv_lists_folded_days_first_with_their_counts(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    generation(alice, numes, days_ago=10, cost="0.5")
    generation(alice, numes, days_ago=10, cost="0.25")
    kept = generation(alice, numes, days_ago=1, cost="1")
    ledger.fold(TODAY - datetime.timedelta(days=5))

    text = b"".join(admin.get(reverse(EXPORT)).streaming_content).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))

    assert list(rows[0]) == list(csv_file.COLUMNS)
    day = (TODAY - datetime.timedelta(days=10)).isoformat()
    assert {k: rows[0][k] for k in ("generation", "started_at", "user", "cost", "generations")} == {
        "generation": "",
        "started_at": f"{day}T00:00:00.000Z",
        "user": "alice",
        "cost": "0.75",
        "generations": "2",
    }
    assert rows[0]["cost_note"] == "daily total of 2 folded generations"
    assert (rows[1]["generation"], rows[1]["generations"]) == (str(kept.pk), "1")


def test_the_owners_migration_fills_existing_rows(alice: Any, numes: Gateway) -> None:
    from importlib import import_module

    from django.apps import apps

    row = generation(alice, numes)
    Generation.objects.filter(pk=row.pk).update(user=None, user_name="")
    migration = import_module("chatapp.migrations.0009_append_only_ledger")

    migration.owners_onto_rows(apps, None)

    row.refresh_from_db()
    assert (row.user_id, row.user_name) == (alice.pk, get_user_model().objects.get().username)


def test_deleting_conversations_does_not_reset_the_answers_per_minute(
    alice: Any, numes: Gateway, settings: Any
) -> None:
    settings.CHAT_GENERATIONS_PER_MINUTE = 2
    for _ in range(2):  # now, not at NOW: a slow run reaches this test minutes after the import
        generation(alice, numes, started=timezone.now())
    Conversation.objects.filter(user=alice).delete()

    with pytest.raises(RateLimited):
        check_generation_start(alice)


def test_the_admin_shows_a_generation_whose_conversation_is_gone(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    answer = generation(alice, numes, cost="0.0001708")
    read_aloud = Generation.objects.create(
        kind="speech", read_aloud=answer.message, conversation=answer.conversation, model="tts"
    )
    Conversation.objects.all().delete()

    listed = admin.get(reverse(CHANGELIST))
    html = listed.content.decode()

    assert listed.status_code == 200
    for text in ("Deleted answer", "Read aloud of a deleted answer", ">deleted<", "$0.0001708"):
        assert text in html
    for row in (answer, read_aloud):
        page = admin.get(reverse("admin:chatapp_generation_change", args=[row.pk]))
        assert page.status_code == 200
    summary = admin.get(reverse(SUMMARY))
    assert [g.label for g in summary.context["summary"].users] == ["alice"]
