"""Retention for the cost ledger: generations older than a day, folded into daily totals.

Generations are never deleted one by one (`GenerationQuerySet.delete` refuses). An operator who
must bound the table runs `manage.py fold_ledger --before DAY`, which calls `fold`: in one
transaction it sums every finished generation started before DAY (UTC) per day, user (key and
name), gateway, model, kind, status, unit, cost source and the groups it was recorded as spent by
into `LedgerDay` rows (each with those groups as `LedgerDayGroup` rows, as a generation has its
`GenerationGroup` rows), exactly (the
summary's integer sums on SQLite, numeric on PostgreSQL), then deletes those generations through
`fold_away`. Every total the app shows reads `LedgerDay` too, so each is the same before and after.

The rows are taken in batches of primary keys, each locked (`SELECT ... FOR UPDATE` on
PostgreSQL; SQLite has one writer) before it is summed and deleted, so a cost settled meanwhile
is either in the sum or waits for the fold. A generation still streaming, or whose cost is still
pending (it settles later, and a folded row could not take it), is left for a later run.
"""

from __future__ import annotations

import datetime
import itertools
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Sum

from chatapp.costs import summary as cost_summary
from chatapp.costs.models import Generation, GenerationGroup, LedgerDay, LedgerDayGroup
from chatapp.gateways.units import CostUnit, Money

__all__ = ["FoldReport", "UnitFolded", "fold"]

BATCH = 2000
_EXACT = Context(prec=60)
# A daily total's key: what the summary, the list and the CSV filter and group by.
_KEY = ("day", "user_id", "user_name", "gateway_id", "model", "kind", "status", "cost_unit",
        "cost_source")  # fmt: skip
# The groups a generation was recorded as spent by: (group key or None, name), sorted.
type _Groups = tuple[tuple[int | None, str], ...]


@dataclass(frozen=True, slots=True)
class UnitFolded:
    """What was folded in one unit (an empty unit: generations without an amount)."""

    unit: str
    generations: int
    amount: Decimal

    def __str__(self) -> str:
        if self.unit in CostUnit.values:
            return f"{self.generations:,} generation(s), {Money(self.amount, CostUnit(self.unit))}"
        return f"{self.generations:,} generation(s) without an amount"


@dataclass(frozen=True, slots=True)
class FoldReport:
    before: datetime.date
    generations: int
    daily_totals: int
    first_day: datetime.date | None
    last_day: datetime.date | None
    per_unit: tuple[UnitFolded, ...]
    dry_run: bool
    pending: int = 0
    """Finished generations before the day left unfolded: their cost is still pending."""


@dataclass(slots=True)
class _Sums:
    generations: int = 0
    priced: int = 0
    prompt: int = 0
    completion: int = 0
    reasoning: int = 0
    cached: int = 0
    amount: Decimal = Decimal(0)

    def add(self, row: dict[str, Any], amount: Decimal) -> None:
        self.generations += int(row["generations"])
        self.priced += int(row["priced"])
        self.prompt += int(row["prompt"] or 0)
        self.completion += int(row["completion"] or 0)
        self.reasoning += int(row["reasoning"] or 0)
        self.cached += int(row["cached"] or 0)
        self.amount = _EXACT.add(self.amount, amount)


def _midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time.min, tzinfo=datetime.UTC)


def _day(value: Any) -> datetime.date:
    return datetime.date.fromisoformat(value) if isinstance(value, str) else value


def _groups_of(pks: tuple[int, ...]) -> dict[int, _Groups]:
    found: dict[int, list[tuple[int | None, str]]] = {}
    links = GenerationGroup.objects.filter(generation_id__in=pks).order_by("group_name", "group")
    for generation_pk, group_pk, name in links.values_list(
        "generation_id", "group_id", "group_name"
    ):
        found.setdefault(generation_pk, []).append((group_pk, name))
    return {pk: tuple(named) for pk, named in found.items()}


def _sum_chunk(pks: tuple[int, ...], groups: dict[tuple[Any, ...], _Sums]) -> None:
    """Sum the generations `pks` into `groups`, keyed by `_KEY` and their groups: those of one
    user and day share them unless a membership changed that day."""
    of = _groups_of(pks)
    alike: dict[_Groups, list[int]] = {}
    for pk in pks:
        alike.setdefault(of.get(pk, ()), []).append(pk)
    for recorded, same in alike.items():
        _sum_batch(Generation.objects.filter(pk__in=same), groups, recorded)


def _sum_batch(batch: Any, groups: dict[tuple[Any, ...], _Sums], recorded: _Groups) -> None:
    grouped = (
        batch.order_by()
        .values(*_KEY[1:], day=cost_summary.utc_day(batch))
        .annotate(
            generations=Count("pk"),
            priced=Count("cost"),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            reasoning=Sum("reasoning_tokens"),
            cached=Sum("cached_tokens"),
            **cost_summary.exact_sums(batch),
        )
    )
    for row in grouped:
        key = (_day(row["day"]), *(row[name] for name in _KEY[1:]), recorded)
        groups.setdefault(key, _Sums()).add(row, cost_summary.exact_amount(batch, row))


def fold(before: datetime.date, *, dry_run: bool = False) -> FoldReport:
    """Fold every finished generation started before `before` (UTC) whose cost is not pending
    into daily totals and delete it, in one transaction; with `dry_run`, only say what would be
    folded."""
    groups: dict[tuple[Any, ...], _Sums] = {}
    with transaction.atomic():
        started = Generation.objects.filter(started_at__lt=_midnight(before)).exclude(
            status=Generation.Status.STREAMING
        )
        pending = started.filter(cost_source=Generation.CostSource.PENDING).count()
        candidates = started.exclude(cost_source=Generation.CostSource.PENDING)
        pks = list(candidates.order_by("pk").values_list("pk", flat=True))
        for chunk in itertools.batched(pks, BATCH):
            batch = Generation.objects.filter(pk__in=chunk)
            if connection.vendor != "sqlite":
                list(batch.select_for_update().values_list("pk", flat=True))
            _sum_chunk(chunk, groups)
            if not dry_run:
                batch.fold_away()  # its GenerationGroup rows with it: `LedgerDayGroup` below
        rows = [_row(key, sums) for key, sums in groups.items()]
        if not dry_run:
            LedgerDay.objects.bulk_create(rows, batch_size=BATCH)
            links = [
                LedgerDayGroup(ledger_day=row, group_id=group_pk, group_name=name)
                for row, key in zip(rows, groups, strict=True)
                for group_pk, name in key[-1]
            ]
            LedgerDayGroup.objects.bulk_create(links, batch_size=BATCH)
    units = sorted({row.cost_unit for row in rows})
    per_unit = tuple(
        UnitFolded(
            unit,
            sum(row.generations for row in rows if row.cost_unit == unit),
            sum((row.cost for row in rows if row.cost_unit == unit), Decimal(0)),
        )
        for unit in units
    )
    days = [row.day for row in rows]
    return FoldReport(
        before=before,
        generations=len(pks),
        daily_totals=len(rows),
        first_day=min(days, default=None),
        last_day=max(days, default=None),
        per_unit=per_unit,
        dry_run=dry_run,
        pending=pending,
    )


def _row(key: tuple[Any, ...], sums: _Sums) -> LedgerDay:
    values = dict(zip(_KEY, key[:-1], strict=True))
    whole, high, low = LedgerDay.cost_parts(sums.amount)
    return LedgerDay(
        **values,
        generations=sums.generations,
        priced=sums.priced,
        prompt_tokens=sums.prompt,
        completion_tokens=sums.completion,
        reasoning_tokens=sums.reasoning,
        cached_tokens=sums.cached,
        cost_whole=whole,
        cost_high=high,
        cost_low=low,
    )
