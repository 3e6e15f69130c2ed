"""Cost totals of a filtered set of generations, added up in the database, per unit.

Every total is keyed by `cost_unit` as well as its group, so amounts in different units are never
added; Python only turns the few grouped rows into dataclasses. The list's totals are one query
grouped by unit. The summary's tables (all, per day, model, user, gateway, and per day and model
for the chart) are one statement: the filtered rows grouped once at the finest grain, in a CTE,
and each table a grouped SELECT over that, UNION ALL. Reading and sorting 100,000 rows once
instead of once per table makes the page three times faster on SQLite. Counts per cost source are
a second, small query.

Sums are exact on both databases. PostgreSQL's numeric SUM is. SQLite keeps a decimal column as
a REAL (15 significant digits, which is also all Django reads back) and its SUM of REALs drifts
(100,000 x 0.0000081 is not 0.81), so there each cost is split in SQL into integers (its whole
part, and its fraction in steps of 1e-15 rounded to the digits the REAL holds, in two halves so
no sum can overflow), which SQLite sums exactly, and `_amount` joins them back.

Generations folded away by retention (`ledger.fold`, `LedgerDay`) are counted with the rest: the
callers pass the daily totals filtered as their generations are, and the finest groups are
those rows' sums UNION ALL the generations', so every table includes them. A folded row keeps its
cost in those same integer parts, so its sums are exact too.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import (
    Count,
    DateField,
    DecimalField,
    Expression,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import TruncDate

from chatapp.costs.models import Generation, LedgerDay
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import CostUnit, Money, is_dollars

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler

__all__ = [
    "DELETED_USER",
    "CostSummary",
    "DailyAmount",
    "GroupTotals",
    "SourceCount",
    "UnitTotal",
    "added_by_unit",
    "busiest_first",
    "exact_sums",
    "folded_sums",
    "grouped_sums",
    "is_sqlite",
    "summarize",
    "totals",
    "totals_by_key",
    "utc_day",
    "utc_day_on",
    "with_amounts",
]

_PLACES = 15  # Generation.cost's decimal_places
_HALF = 10**8
_EXACT = Context(prec=60)  # wide enough for any sum of 30-digit amounts
_UNITS = frozenset(CostUnit.values)
_ESTIMATED = Q(cost_source=Generation.CostSource.ESTIMATE)
# The per-user key of a deleted user's generations is this and the name kept on their rows.
DELETED_USER = "deleted:"


@dataclass(frozen=True, slots=True)
class UnitTotal:
    """The exact sum of the amounts in one unit, and how much of it is estimated."""

    unit: CostUnit
    amount: Decimal
    estimated: Decimal
    priced: int  # generations with an amount in this unit
    # In the operator's display currency (`Money.converted`), for a unit not read as dollars.
    converted: Money | None

    @classmethod
    def of(cls, unit: CostUnit, amount: Decimal, estimated: Decimal, priced: int) -> UnitTotal:
        converted = None if is_dollars(unit) else Money(amount, unit).converted()
        return cls(unit, amount, estimated, priced, converted)

    @property
    def money(self) -> Money:
        return Money(self.amount, self.unit)

    @property
    def estimated_money(self) -> Money:
        return Money(self.estimated, self.unit)


@dataclass(frozen=True, slots=True)
class GroupTotals:
    """One group's generations (a day, a model, a user, a gateway, or all of them)."""

    key: str  # what the group is filtered by: an ISO day, a model, a user's or gateway's pk
    label: str
    generations: int
    unpriced: int  # without an amount: pending, unavailable, not billed
    prompt_tokens: int
    completion_tokens: int
    totals: tuple[UnitTotal, ...]  # one per unit, in `CostUnit` order


@dataclass(frozen=True, slots=True)
class SourceCount:
    source: Generation.CostSource
    generations: int


@dataclass(frozen=True, slots=True)
class DailyAmount:
    """A day's spend in one unit, of one series (the unit itself, or a model): a chart's bar."""

    day: datetime.date
    unit: CostUnit
    series: str
    amount: Decimal


@dataclass(frozen=True, slots=True)
class CostSummary:
    overall: GroupTotals
    days: tuple[GroupTotals, ...]
    models: tuple[GroupTotals, ...]
    users: tuple[GroupTotals, ...]
    gateways: tuple[GroupTotals, ...]
    sources: tuple[SourceCount, ...]  # every cost source, zeros included
    daily: tuple[DailyAmount, ...]  # the chart: per unit, or per model when asked for


# --- Exact sums -------------------------------------------------------------------------------


def _fraction_steps(x: str) -> str:
    """SQLite: the fraction of REAL `x` in steps of 1e-15, rounded to the decimal places its 15
    significant digits leave (14 for 1 <= |x| < 10, ...), so the REAL's binary error is dropped."""
    fraction = f"({x} - CAST({x} AS INTEGER))"
    branches = [f"WHEN ABS({x}) < 1 THEN CAST(ROUND({fraction} * 1e{_PLACES}) AS INTEGER)"]
    for digits in range(1, _PLACES + 1):
        branches.append(
            f"WHEN ABS({x}) < 1e{digits} "
            f"THEN CAST(ROUND({fraction} * 1e{_PLACES - digits}) AS INTEGER) * {10**digits}"
        )
    return f"CASE {' '.join(branches)} ELSE 0 END"


class _CostPart(Func):
    """One integer part of a cost on SQLite; `sql` has `{x}` where the cost column goes."""

    sql: ClassVar[str]
    output_field = IntegerField()

    def __init__(self) -> None:
        super().__init__(F("cost"))

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[str | int, ...]]:
        column, params = compiler.compile(self.source_expressions[0])
        return self.sql.replace("{x}", column), tuple(params) * self.sql.count("{x}")


class _Whole(_CostPart):
    sql = "CAST({x} AS INTEGER)"


# The fraction's steps are summed in two halves, high * _HALF + low: high is the fraction's first
# 7 digits, truncated (a cheap expression; its error does not matter), and low the exact steps
# less high * _HALF, so each sum stays far from overflowing while the two add up exactly.
_HIGH = f"CAST(({{x}} - CAST({{x}} AS INTEGER)) * {10**_PLACES // _HALF} AS INTEGER)"


class _FractionHigh(_CostPart):
    sql = _HIGH


class _FractionLow(_CostPart):
    sql = f"(({_fraction_steps('{x}')}) - {_HIGH} * {_HALF})"


def is_sqlite(queryset: QuerySet[Any]) -> bool:
    return connections[queryset.db].vendor == "sqlite"


def _amount_sums(sqlite: bool, name: str, only: Q | None = None) -> dict[str, Sum]:
    if not sqlite:
        return {name: Sum("cost", filter=only)}
    return {
        f"{name}_whole": Sum(_Whole(), filter=only),
        f"{name}_high": Sum(_FractionHigh(), filter=only),
        f"{name}_low": Sum(_FractionLow(), filter=only),
    }


def _folded_amount_sums(sqlite: bool, name: str, only: Q | None = None) -> dict[str, Any]:
    """`_amount_sums` over `LedgerDay`'s parts: the same integers on SQLite, one exact numeric
    on PostgreSQL (SUM of bigint is numeric there)."""
    whole, high, low = (Sum(f"cost_{part}", filter=only) for part in ("whole", "high", "low"))
    if sqlite:
        return {f"{name}_whole": whole, f"{name}_high": high, f"{name}_low": low}
    steps = Value(Decimal(1).scaleb(-_PLACES))
    joined = whole + high * Value(Decimal(_HALF).scaleb(-_PLACES)) + low * steps
    return {name: ExpressionWrapper(joined, output_field=DecimalField())}


def grouped_sums(sqlite: bool) -> dict[str, Count | Sum]:
    """Per group: counts, tokens and the exact amounts (all added again when groups merge)."""
    return {
        "generations": Count("pk"),
        "priced": Count("cost"),
        "prompt": Sum("prompt_tokens"),
        "completion": Sum("completion_tokens"),
        **_amount_sums(sqlite, "amount"),
        **_amount_sums(sqlite, "estimated", _ESTIMATED),
    }


def folded_sums(sqlite: bool) -> dict[str, Any]:
    """`grouped_sums` of folded rows, under the same names and in the same order (a UNION's
    columns)."""
    return {
        "generations": Sum("generations"),
        "priced": Sum("priced"),
        "prompt": Sum("prompt_tokens"),
        "completion": Sum("completion_tokens"),
        **_folded_amount_sums(sqlite, "amount"),
        **_folded_amount_sums(sqlite, "estimated", _ESTIMATED),
    }


def exact_sums(queryset: QuerySet[Generation]) -> dict[str, Any]:
    """The aggregates whose row `exact_amount` reads: the cost summed exactly (`ledger.fold`)."""
    return _amount_sums(is_sqlite(queryset), "amount")


def exact_amount(queryset: QuerySet[Generation], row: Mapping[str, Any]) -> Decimal:
    return _amount(is_sqlite(queryset), row, "amount")


def _amount(sqlite: bool, row: Mapping[str, Any], name: str) -> Decimal:
    if not sqlite:
        return Decimal(row[name] or 0)
    steps = int(row[f"{name}_whole"] or 0) * 10**_PLACES
    steps += int(row[f"{name}_high"] or 0) * _HALF + int(row[f"{name}_low"] or 0)
    return Decimal(steps).scaleb(-_PLACES, _EXACT)


def utc_day(queryset: QuerySet[Generation]) -> Expression:
    """A generation's UTC day (`started_at`), as the summary and the ledger's days count it."""
    return utc_day_on(is_sqlite(queryset))


def utc_day_on(sqlite: bool) -> Expression:
    # Django's TruncDate calls a Python function per row on SQLite; there `started_at` is stored
    # as UTC text, whose native date() is the UTC day at a fraction of the cost.
    if sqlite:
        return Func(F("started_at"), function="DATE", output_field=DateField())
    return TruncDate("started_at", tzinfo=datetime.UTC)


# --- Folding grouped rows ---------------------------------------------------------------------


def totals_by_key(
    rows: Iterable[dict[str, Any]], labels: Mapping[str, str] | None = None, none: str = "(none)"
) -> list[GroupTotals]:
    """Grouped rows (one per key and unit) into one `GroupTotals` per key, in first-seen order.
    A null key (no gateway) is the key "" labelled `none`."""
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        key = "" if row["key"] is None else str(row["key"])
        groups.setdefault(key, {})[row["unit"]] = row
    folded = []
    for key, units in groups.items():
        totals = tuple(
            UnitTotal.of(unit, found["amount"], found["estimated"], int(found["priced"]))
            for unit in CostUnit
            if (found := units.get(unit.value)) is not None and found["priced"]
        )
        generations = sum(int(row["generations"]) for row in units.values())
        folded.append(
            GroupTotals(
                key=key,
                label=(labels or {}).get(key, key) if key else none,
                generations=generations,
                unpriced=generations - sum(total.priced for total in totals),
                prompt_tokens=sum(int(row["prompt"] or 0) for row in units.values()),
                completion_tokens=sum(int(row["completion"] or 0) for row in units.values()),
                totals=totals,
            )
        )
    return folded


def busiest_first(groups: list[GroupTotals]) -> tuple[GroupTotals, ...]:
    return tuple(sorted(groups, key=lambda group: (-group.generations, group.label)))


def _overall(rows: Iterable[dict[str, Any]]) -> GroupTotals:
    folded = totals_by_key(({**row, "key": "all"} for row in rows), none="all")
    return folded[0] if folded else GroupTotals("all", "all", 0, 0, 0, 0, ())


def with_amounts(sqlite: bool, row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "amount": _amount(sqlite, row, "amount"),
        "estimated": _amount(sqlite, row, "estimated"),
    }


# --- The queries ------------------------------------------------------------------------------


def added_by_unit(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one unit (generations', then folded ones') added into one per unit."""
    by_unit: dict[str, dict[str, Any]] = {}
    for row in rows:
        found = by_unit.get(row["unit"])
        if found is None:
            by_unit[row["unit"]] = dict(row)
            continue
        for name in ("generations", "priced", "prompt", "completion", "amount", "estimated"):
            found[name] = (found[name] or 0) + (row[name] or 0)
    return list(by_unit.values())


def totals(
    queryset: QuerySet[Generation], *, folded: QuerySet[LedgerDay] | None = None
) -> GroupTotals:
    """All of `queryset`'s generations, and the `folded` ones' daily totals: a query grouped by
    unit for each."""
    sqlite = is_sqlite(queryset)
    rows = [
        with_amounts(sqlite, row)
        for row in queryset.order_by().values(unit=F("cost_unit")).annotate(**grouped_sums(sqlite))
    ]
    if folded is not None:
        grouped = folded.order_by().values(unit=F("cost_unit")).annotate(**folded_sums(sqlite))
        rows += [with_amounts(sqlite, row) for row in grouped]
    return _overall(added_by_unit(rows))


# A user's key: their pk, or for a deleted user's generations the name kept on them.
_USER_KEY = f"COALESCE(CAST(g_user AS TEXT), '{DELETED_USER}' || g_user_name)"
# The tables over the finest groups: name, day column, key expression (None: no such column).
_TABLES: tuple[tuple[str, str | None, str | None], ...] = (
    ("all", None, None),
    ("day", "g_day", None),
    ("model", None, "CAST(g_model AS TEXT)"),
    ("user", None, _USER_KEY),
    ("gateway", None, "CAST(g_gateway AS TEXT)"),
)
_DAY_MODEL = ("day_model", "g_day", "CAST(g_model AS TEXT)")


def _finest(queryset: QuerySet[Any], day: Expression | F, sums: Mapping[str, Any]) -> QuerySet[Any]:
    finest: QuerySet[Any] = (
        queryset.order_by()  # the list's ordering would join the GROUP BY
        .values(
            g_day=day,
            g_model=F("model"),
            g_user=F("user_id"),
            g_user_name=F("user_name"),
            g_gateway=F("gateway_id"),
            g_unit=F("cost_unit"),
        )
        .annotate(**sums)
    )
    return finest


def _tables(
    queryset: QuerySet[Generation], folded: QuerySet[LedgerDay] | None, by_model: bool
) -> dict[str, list[dict[str, Any]]]:
    """The one statement: {table: rows with day, key, unit and the sums}."""
    sqlite = is_sqlite(queryset)
    sums = grouped_sums(sqlite)
    inner, params = _finest(queryset, utc_day_on(sqlite), sums).query.sql_with_params()
    if folded is not None:
        days = _finest(folded, F("day"), folded_sums(sqlite))
        folded_sql, folded_params = days.query.sql_with_params()
        inner, params = f"{inner} UNION ALL {folded_sql}", (*params, *folded_params)
    added = ", ".join(f"SUM({name})" for name in sums)
    selects = []
    for name, day, key in (*_TABLES, _DAY_MODEL) if by_model else _TABLES:
        # Typed NULLs and text keys: PostgreSQL wants one type per column across a UNION.
        day_column = day or "CAST(NULL AS DATE)"
        key_column = key or "CAST(NULL AS TEXT)"
        grouping = ", ".join(column for column in (day, key, "g_unit") if column)
        selects.append(
            f"SELECT '{name}', {day_column}, {key_column}, g_unit, {added} "
            f"FROM finest GROUP BY {grouping}"
        )
    sql = f"WITH finest AS ({inner}) " + " UNION ALL ".join(selects)
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in (*_TABLES, _DAY_MODEL)}
    for table, day, key, unit, *values in fetched:
        # SQLite's DATE() is text.
        date = datetime.date.fromisoformat(day) if isinstance(day, str) else day
        row = {"day": date, "key": key, "unit": unit, **dict(zip(sums, values, strict=True))}
        tables[table].append(with_amounts(sqlite, row))
    return tables


def _daily(rows: Sequence[dict[str, Any]], by_model: bool) -> tuple[DailyAmount, ...]:
    return tuple(
        DailyAmount(row["day"], CostUnit(unit), row["key"] if by_model else CostUnit(unit).label,
                    row["amount"])
        for row in rows
        if row["priced"] and (unit := row["unit"]) in _UNITS
    )  # fmt: skip


def _user_labels(keys: Iterable[str]) -> dict[str, str]:
    """Each user key's label: the user's name now, or the name a deleted user's rows keep."""
    labels = {key: f"{key.removeprefix(DELETED_USER)} (deleted)" for key in keys}
    pks = [key for key in labels if not key.startswith(DELETED_USER)]
    for user in get_user_model().objects.filter(pk__in=pks):
        labels[str(user.pk)] = user.get_username()
    return labels


def _source_counts(
    queryset: QuerySet[Generation], folded: QuerySet[LedgerDay] | None
) -> dict[str, int]:
    counted = dict(
        queryset.order_by()
        .values("cost_source")
        .annotate(n=Count("pk"))
        .values_list("cost_source", "n")
    )
    if folded is not None:
        grouped = folded.order_by().values("cost_source").annotate(n=Sum("generations"))
        for source, count in grouped.values_list("cost_source", "n"):
            counted[source] = counted.get(source, 0) + int(count or 0)
    return counted


def summarize(
    queryset: QuerySet[Generation],
    by_model: bool = False,
    *,
    folded: QuerySet[LedgerDay] | None = None,
) -> CostSummary:
    """The summary page's tables, and its chart's bars per unit (or per model, `by_model`), of
    `queryset`'s generations and the `folded` ones' daily totals."""
    tables = _tables(queryset, folded, by_model)
    days = totals_by_key({**row, "key": row["day"].isoformat()} for row in tables["day"])
    gateway_keys = [row["key"] for row in tables["gateway"] if row["key"] is not None]
    gateway_names = Gateway.objects.filter(pk__in=gateway_keys).values_list("pk", "name")
    counted = _source_counts(queryset, folded)
    return CostSummary(
        overall=_overall(tables["all"]),
        days=tuple(sorted(days, key=lambda group: group.key)),
        models=busiest_first(totals_by_key(tables["model"])),
        users=busiest_first(
            totals_by_key(tables["user"], _user_labels(str(row["key"]) for row in tables["user"]))
        ),
        # Generations recorded before gateways were rows have none.
        gateways=busiest_first(
            totals_by_key(
                tables["gateway"], {str(pk): name for pk, name in gateway_names}, "(no gateway)"
            )
        ),
        sources=tuple(
            SourceCount(source, counted.get(source, 0)) for source in Generation.CostSource
        ),
        daily=_daily(tables["day_model"] if by_model else tables["day"], by_model),
    )
