"""Running totals of the cost ledger: per user, per group and per gateway, per day and per month,
per gateway and unit, so that a spend line, a limit's check and a spend push read a few rows
instead of summing the month's generations (which cost a page more as its user's history grew).

The ledger (`Generation`, and `LedgerDay` once folded) stays the source of truth; a total is
derived from it and kept in step in the transaction that settles a cost: `Generation.save` calls
`count` once, when its cost leaves `pending` (a generation still pending is not in any total: the
limits count it by its reservation, `spend_ceiling`). Folding moves settled generations into
daily totals and changes no sum, so it leaves these alone. `manage.py reconcile_costs` compares
every row with the ledger's sums and repairs what drifted (`totals_check`).

`count` is one statement whatever the number of groups: an upsert (`INSERT ... SELECT ... ON
CONFLICT DO UPDATE SET x = x + excluded.x`, the same on SQLite and PostgreSQL), which adds to a
row atomically, so two processes settling at once both count, and the first cost of a period
makes its row. Amounts are kept as `LedgerDay` keeps them, exact integers (whole part, and the
fraction in steps of 1e-15 split at 1e-7), which SQLite adds exactly too.

The totals' rows are `SpendTotal` (`costs/models.py`), which imports this module: this one imports
no model.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Context, Decimal
from typing import Any, Protocol

from django.db import connection
from django.utils import timezone

__all__ = ["Tally", "count", "parts", "period_starts", "stored"]

_EXACT = Context(prec=60)
_PLACES = Decimal(1).scaleb(-15)
_SQLITE_DIGITS = Context(prec=15)  # what SQLite keeps of a decimal (a REAL), as Django reads it
NOT_BILLED = "not_billed"  # Generation.CostSource.NOT_BILLED
ESTIMATE = "estimate"  # Generation.CostSource.ESTIMATE


@dataclass(frozen=True, slots=True)
class Tally:
    """What one settled generation adds to each of its totals (or the ledger's sum of a key)."""

    priced: int = 0
    unpriced: int = 0
    not_billed: int = 0
    amount: Decimal = Decimal(0)
    estimated: Decimal = Decimal(0)

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.priced + other.priced,
            self.unpriced + other.unpriced,
            self.not_billed + other.not_billed,
            _EXACT.add(self.amount, other.amount),
            _EXACT.add(self.estimated, other.estimated),
        )

    @classmethod
    def of(cls, cost: Decimal | None, source: str) -> Tally:
        if cost is not None:
            amount = stored(cost)
            return cls(
                priced=1, amount=amount, estimated=amount if source == ESTIMATE else Decimal(0)
            )
        if source == NOT_BILLED:
            return cls(not_billed=1)
        return cls(unpriced=1)

    @classmethod
    def of_row(cls, row: _Row) -> Tally:
        return cls(row.priced, row.unpriced, row.not_billed, row.amount, row.estimated)

    def columns(self) -> dict[str, int]:
        whole, high, low = parts(self.amount)
        e_whole, e_high, e_low = parts(self.estimated)
        return {
            "priced": self.priced,
            "unpriced": self.unpriced,
            "not_billed": self.not_billed,
            "cost_whole": whole,
            "cost_high": high,
            "cost_low": low,
            "estimated_whole": e_whole,
            "estimated_high": e_high,
            "estimated_low": e_low,
        }


def parts(amount: Decimal) -> tuple[int, int, int]:
    """`amount` as (whole, high, low): the columns of a total, and of a daily total
    (`LedgerDay.cost_parts`), that `joined` joins back."""
    whole = int(amount.to_integral_value(ROUND_FLOOR))
    steps = int(((amount - whole) * 10**15).to_integral_value(ROUND_FLOOR))
    return whole, steps // 10**8, steps % 10**8


def joined(whole: int, high: int, low: int) -> Decimal:
    steps = high * 10**8 + low
    return _EXACT.add(Decimal(whole), Decimal(steps).scaleb(-15, _EXACT))


def stored(cost: Decimal) -> Decimal:
    """`cost` as the database keeps it and the summary sums it: 15 decimal places, and on
    SQLite (a REAL) 15 significant digits."""
    amount = cost.quantize(_PLACES, context=_EXACT)
    if connection.vendor == "sqlite":
        amount = _SQLITE_DIGITS.create_decimal_from_float(float(amount)).quantize(
            _PLACES, context=_EXACT
        )
    return amount


def period_starts(started_at: datetime.datetime) -> tuple[datetime.date, datetime.date]:
    """The first day of `started_at`'s day and month, in the server's TIME_ZONE (the limits')."""
    day = timezone.localtime(started_at).date()
    return day, day.replace(day=1)


class _Row(Protocol):
    """What `Tally.of_row` reads of a `SpendTotal` (not imported: `costs/models.py` imports
    this)."""

    priced: int
    unpriced: int
    not_billed: int

    @property
    def amount(self) -> Decimal: ...

    @property
    def estimated(self) -> Decimal: ...


class _Settled(Protocol):
    """What `count` reads of a `Generation` (not imported: `costs/models.py` imports this)."""

    pk: Any
    user_id: int | None
    gateway_id: int | None
    started_at: datetime.datetime
    cost: Decimal | None
    cost_unit: str
    cost_source: str


_COLUMNS = tuple(Tally().columns())
_TABLE = "chatapp_spendtotal"


def _upsert_sql(date_cast: str) -> str:
    added = ", ".join(f"{name} = {_TABLE}.{name} + excluded.{name}" for name in _COLUMNS)
    values = ", ".join("%s" for _ in _COLUMNS)
    # The WHERE is SQLite's: an upsert's SELECT needs one, or its ON reads as a join's.
    return (
        f"INSERT INTO {_TABLE} (scope, scope_key, period, start, gateway_key, unit, "
        f"{', '.join(_COLUMNS)}) "
        f"SELECT s.scope, s.scope_key, p.period, p.start, %s, %s, {values} FROM ("
        "SELECT CAST('user' AS VARCHAR(8)) AS scope, CAST(%s AS BIGINT) AS scope_key "
        "UNION ALL SELECT 'gateway', CAST(%s AS BIGINT) "
        "UNION ALL SELECT 'group', group_id FROM chatapp_generationgroup "
        "WHERE generation_id = %s AND group_id IS NOT NULL) AS s "
        f"CROSS JOIN (SELECT CAST('day' AS VARCHAR(8)) AS period, {date_cast} AS start "
        f"UNION ALL SELECT 'month', {date_cast}) AS p "
        "WHERE s.scope_key IS NOT NULL "
        "ON CONFLICT (scope, scope_key, period, start, gateway_key, unit) "
        f"DO UPDATE SET {added}"
    )


_SQL = {
    "sqlite": _upsert_sql("%s"),  # a date is ISO text there; CAST AS DATE would make it a number
    "postgresql": _upsert_sql("CAST(%s AS DATE)"),
}


def count(generation: _Settled) -> None:
    """Add `generation`, whose cost just settled, to its user's, gateway's and groups' totals
    of its day and month: one statement, in the caller's transaction."""
    tally = Tally.of(generation.cost, generation.cost_source)
    unit = generation.cost_unit if generation.cost is not None else ""
    day, month = period_starts(generation.started_at)
    params = [
        generation.gateway_id or 0,
        unit,
        *tally.columns().values(),
        generation.user_id,
        generation.gateway_id,
        generation.pk,
        day,
        month,
    ]
    with connection.cursor() as cursor:
        cursor.execute(_SQL[connection.vendor], params)
