"""Cost totals per user group (`auth.Group`), beside the summary's per day, model, user and
gateway (`summary`), and the chart's bars per group.

A generation's groups are those recorded with it when it started (`GenerationGroup`), since
memberships change. The totals are one query over the generations joined to those rows, grouped
by day, group and unit: a generation whose user was in two groups is a row of each, so it counts
once in each group's total, and the groups' totals can add up to more than the overall total
(the page says so); the daily totals retention folded generations into (`LedgerDay`) are joined
to their groups (`LedgerDayGroup`) the same way. A generation recorded with no group is the
"(no group)" row. Sums are the summary's
own (its `grouped_sums`, `totals_by_key` and the rest, reused rather than written twice): exact
on both databases. ("Group" in `GroupTotals` is the summary's word for any row of a table; here
the rows are user groups.)
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group
from django.db.models import F, QuerySet

from chatapp.costs.models import Generation, LedgerDay
from chatapp.costs.summary import (
    DailyAmount,
    GroupTotals,
    added_by_unit,
    busiest_first,
    folded_sums,
    grouped_sums,
    is_sqlite,
    totals_by_key,
    utc_day_on,
    with_amounts,
)
from chatapp.gateways.units import CostUnit

__all__ = ["DELETED_GROUP", "NO_GROUP", "GroupSpend", "group_spend"]

# A deleted group's key: this and the name its rows keep; generations of no group: `NO_GROUP`.
DELETED_GROUP = "deleted:"
NO_GROUP = "none"


@dataclass(frozen=True, slots=True)
class GroupSpend:
    groups: tuple[GroupTotals, ...]  # busiest first
    daily: tuple[DailyAmount, ...]  # a chart's bars: a series per group


def _rows(
    queryset: QuerySet[Generation], folded: QuerySet[LedgerDay] | None
) -> list[dict[str, Any]]:
    """Per day, group key and unit, the sums (the summary's names), generations' then folded."""
    sqlite = is_sqlite(queryset)
    grouped = (
        queryset.order_by()
        .values(
            day=utc_day_on(sqlite),
            group=F("group_links__group_id"),
            name=F("group_links__group_name"),
            unit=F("cost_unit"),
        )
        .annotate(**grouped_sums(sqlite))
    )
    rows: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = [dict(row) for row in grouped]
    if folded is not None:
        days = (
            folded.order_by()
            .values(
                "day",
                group=F("group_links__group_id"),
                name=F("group_links__group_name"),
                unit=F("cost_unit"),
            )
            .annotate(**folded_sums(sqlite))
        )
        found += [dict(row) for row in days]
    for row in found:
        if row["group"] is not None:
            key = str(row["group"])
        elif row["name"] is not None:  # a group deleted since
            key = DELETED_GROUP + row["name"]
        else:
            key = NO_GROUP
        rows.append(with_amounts(sqlite, {**row, "key": key}))
    for summed in rows:  # SQLite's DATE() is text
        if isinstance(summed["day"], str):
            summed["day"] = datetime.date.fromisoformat(summed["day"])
    return rows


def _labels(keys: Iterable[str]) -> dict[str, str]:
    """Each key's label: the group's name now, or the name a deleted group's rows keep."""
    labels = {NO_GROUP: "(no group)"}
    pks = []
    for key in keys:
        if key.startswith(DELETED_GROUP):
            labels[key] = f"{key.removeprefix(DELETED_GROUP)} (deleted)"
        elif key.isdigit():
            pks.append(int(key))
    for pk, name in Group.objects.filter(pk__in=pks).values_list("pk", "name"):
        labels[str(pk)] = name
    return labels


def _added_by(rows: Iterable[dict[str, Any]], *names: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Rows with the same `names` and unit, added into one."""
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        found.setdefault((*(row[name] for name in names), row["unit"]), []).append(row)
    return {key: added_by_unit(same)[0] for key, same in found.items()}


def _daily(rows: Iterable[dict[str, Any]], labels: Mapping[str, str]) -> tuple[DailyAmount, ...]:
    return tuple(
        DailyAmount(day, CostUnit(unit), labels.get(key, key), row["amount"])
        for (day, key, unit), row in _added_by(rows, "day", "key").items()
        if row["priced"] and unit in CostUnit.values
    )


def group_spend(
    queryset: QuerySet[Generation], *, folded: QuerySet[LedgerDay] | None = None
) -> GroupSpend:
    """`queryset`'s generations and the `folded` daily totals, per group."""
    rows = _rows(queryset, folded)
    labels = _labels({row["key"] for row in rows})
    per_group = [{**row, "key": key} for (key, _), row in _added_by(rows, "key").items()]
    return GroupSpend(busiest_first(totals_by_key(per_group, labels)), _daily(rows, labels))
