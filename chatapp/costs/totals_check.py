"""The running totals (`running_totals.SpendTotal`) checked against the ledger they are derived
from, and repaired: `manage.py reconcile_costs` runs `check` after settling, and the migration
that made the table filled it with `rebuild`.

What the ledger says a total is: every settled generation (its cost no longer `pending`) and
every daily total folded from generations (`LedgerDay`), each counted for its user, its gateway
and the groups it was recorded as spent by, in its day and its month. A folded day is a UTC day,
which is the server's day as long as `TIME_ZONE` is UTC (the shipped setting).

The check holds the totals still while it reads: on PostgreSQL it locks the table (a settle waits,
then adds to the repaired row); on SQLite every write transaction is `IMMEDIATE` already.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.apps import apps as installed_apps
from django.db import connection, transaction

from chatapp.costs.models import SpendTotal
from chatapp.costs.running_totals import ESTIMATE, NOT_BILLED, Tally, joined, period_starts

__all__ = ["Drift", "check", "expected", "rebuild"]

PENDING = "pending"  # Generation.CostSource.PENDING

# (scope, scope key, period, start, gateway key, unit)
type Key = tuple[str, int, str, datetime.date, int, str]


@dataclass(frozen=True, slots=True)
class Drift:
    key: Key
    kept: Tally
    ledger: Tally

    def __str__(self) -> str:
        scope, scope_key, period, start, gateway, unit = self.key
        return (
            f"{scope} {scope_key}, {period} of {start}, gateway {gateway or '(none)'}, "
            f"{unit or 'no amount'}: kept {_words(self.kept)}, "
            f"the ledger says {_words(self.ledger)}"
        )


def _words(tally: Tally) -> str:
    return (
        f"{tally.amount.normalize():f} ({tally.priced} priced, {tally.unpriced} without an "
        f"amount, {tally.not_billed} not billed)"
    )


def _keys(
    user: int | None,
    gateway: int | None,
    groups: list[int],
    day: datetime.date,
    month: datetime.date,
    unit: str,
) -> Iterator[Key]:
    scopes = [("user", user), ("gateway", gateway), *(("group", group) for group in groups)]
    for scope, scope_key in scopes:
        if scope_key is None:
            continue
        yield (scope, scope_key, "day", day, gateway or 0, unit)
        yield (scope, scope_key, "month", month, gateway or 0, unit)


def _links(model: Any, owner: str) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    rows = model.objects.filter(group__isnull=False).values_list(owner, "group_id")
    for owner_pk, group_pk in rows.iterator(chunk_size=5000):
        found.setdefault(owner_pk, []).append(group_pk)
    return found


def expected(apps: Any = installed_apps) -> dict[Key, Tally]:
    """Every total as the ledger sums it (`apps`: a migration's historical models)."""
    generation_model = apps.get_model("chatapp", "Generation")
    groups = _links(apps.get_model("chatapp", "GenerationGroup"), "generation_id")
    totals: dict[Key, Tally] = {}

    def add(keys: Iterator[Key], tally: Tally) -> None:
        for key in keys:
            totals[key] = totals.get(key, Tally()) + tally

    settled = generation_model.objects.exclude(cost_source=PENDING).values_list(
        "pk", "user_id", "gateway_id", "started_at", "cost", "cost_unit", "cost_source"
    )
    for pk, user, gateway, started, cost, unit, source in settled.iterator(chunk_size=5000):
        day, month = period_starts(started)
        unit = unit if cost is not None else ""
        add(_keys(user, gateway, groups.get(pk, []), day, month, unit), Tally.of(cost, source))
    day_groups = _links(apps.get_model("chatapp", "LedgerDayGroup"), "ledger_day_id")
    folded = apps.get_model("chatapp", "LedgerDay").objects.values_list(
        "pk",
        "user_id",
        "gateway_id",
        "day",
        "cost_unit",
        "cost_source",
        "generations",
        "priced",
        "cost_whole",
        "cost_high",
        "cost_low",
    )
    for pk, user, gateway, day, unit, source, count, priced, *cost in folded.iterator(5000):
        amount = joined(*cost)
        scopes = (user, gateway, day_groups.get(pk, []), day, day.replace(day=1))
        if priced:
            estimated = amount if source == ESTIMATE else Decimal(0)
            add(_keys(*scopes, unit), Tally(priced=priced, amount=amount, estimated=estimated))
        if count > priced:
            rest = count - priced
            not_billed = source == NOT_BILLED
            tally = Tally(unpriced=0 if not_billed else rest, not_billed=rest if not_billed else 0)
            add(_keys(*scopes, ""), tally)
    return totals


def _key(row: Any) -> Key:
    return (row.scope, row.scope_key, row.period, row.start, row.gateway_key, row.unit)


def check(*, repair: bool = True) -> list[Drift]:
    """Every total that differs from the ledger's sum (a row missing, or one the ledger has no
    generation for, included); with `repair`, each set to the ledger's."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {SpendTotal._meta.db_table} IN EXCLUSIVE MODE")
        ledger = expected()
        kept = {_key(row): row for row in SpendTotal.objects.all()}
        drifts = []
        for key in sorted(ledger.keys() | kept.keys(), key=str):
            row = kept.get(key)
            have = Tally() if row is None else Tally.of_row(row)
            want = ledger.get(key, Tally())
            if have != want:
                drifts.append(Drift(key, have, want))
        if repair:
            for drift in drifts:
                _write(kept.get(drift.key), drift.key, drift.ledger)
    return drifts


def _write(row: SpendTotal | None, key: Key, tally: Tally) -> None:
    if row is None:
        SpendTotal.objects.create(**_fields(key, tally))
    elif tally == Tally():
        row.delete()  # derived, not a money fact: the ledger has nothing for it
    else:
        SpendTotal.objects.filter(pk=row.pk).update(**tally.columns())


def rebuild(apps: Any, schema_editor: Any) -> None:
    """The migration's: every total from the ledger, into the new, empty table."""
    model = apps.get_model("chatapp", "SpendTotal")
    model.objects.bulk_create(
        (model(**_fields(key, tally)) for key, tally in expected(apps).items()), batch_size=2000
    )


def _fields(key: Key, tally: Tally) -> dict[str, Any]:
    """A total's row, as `_key` reads it back."""
    scope, scope_key, period, start, gateway, unit = key
    return {
        "scope": scope,
        "scope_key": scope_key,
        "period": period,
        "start": start,
        "gateway_key": gateway,
        "unit": unit,
        **tally.columns(),
    }
