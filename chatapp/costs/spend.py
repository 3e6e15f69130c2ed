"""What a user sees of their own spend: a conversation's running total and this month's.

One line a person can read (#45): amounts in units that are dollars exactly (US dollars, and
Osmexo's micro-dollars) are added into one figure; an amount in any other unit (sats, PnP, a
gateway's credits) is shown on its own, named by its gateway; answers without an amount say
which gateway reported no price; answers a gateway did not bill (refused before they began) are
no "answer without an amount". Figures are rounded for reading (`Money.rounded`); the admin
keeps the exact ones.

This month's reads the running totals (`running_totals.SpendTotal`): one statement, whatever the
user's history. A conversation's reads its own generations (a few dozen at most). A cost still
pending is in neither until it settles: it has no amount yet rather than none (a title, which
runs right after every first answer, used to add "· 1 answer without an amount" to the header
for the moment it took).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from chatapp.costs.models import Generation, SpendTotal
from chatapp.costs.running_totals import Tally, period_starts
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import CostUnit, Money, in_dollars, is_dollars

if TYPE_CHECKING:
    import datetime

    from django.contrib.auth.models import User

__all__ = ["GatewayAmount", "SpendLine", "conversation_spend", "month_spend"]


@dataclass(frozen=True, slots=True)
class GatewayAmount:
    """An amount in a unit that is not dollars, through one gateway."""

    gateway: str
    money: Money
    estimated: Money | None

    def __str__(self) -> str:
        return f"{self.money.rounded()} on {self.gateway}"


@dataclass(frozen=True, slots=True)
class Unpriced:
    """Answers through one gateway that have no amount."""

    gateway: str
    answers: int

    def __str__(self) -> str:
        plural = "" if self.answers == 1 else "s"
        return f"{self.answers} answer{plural} without an amount ({self.gateway} reports no price)"


@dataclass(frozen=True, slots=True)
class SpendLine:
    dollars: Money | None  # every amount in dollars or micro-dollars, in dollars
    dollars_estimated: Money | None
    others: tuple[GatewayAmount, ...]
    unpriced: tuple[Unpriced, ...]
    not_billed: int

    @property
    def empty(self) -> bool:
        return self.dollars is None and not self.others and not self.unpriced

    @classmethod
    def of(cls, rows: Iterable[tuple[str, str, Tally]]) -> SpendLine:
        """From (gateway name, unit, tally) rows; a unit of "" holds those without an amount."""
        dollars = estimated = Decimal(0)
        priced_dollars = False
        others: dict[tuple[str, str], Tally] = {}
        unpriced: dict[str, int] = {}
        not_billed = 0
        for gateway, unit, tally in rows:
            not_billed += tally.not_billed
            if tally.unpriced:
                unpriced[gateway] = unpriced.get(gateway, 0) + tally.unpriced
            if not tally.priced or unit not in CostUnit.values:
                continue
            if is_dollars(unit):
                dollars += in_dollars(tally.amount, unit)
                estimated += in_dollars(tally.estimated, unit)
                priced_dollars = True
            else:
                others[gateway, unit] = others.get((gateway, unit), Tally()) + tally
        return cls(
            dollars=Money(dollars, CostUnit.USD) if priced_dollars else None,
            dollars_estimated=Money(estimated, CostUnit.USD) if estimated else None,
            others=tuple(
                GatewayAmount(
                    gateway,
                    Money(tally.amount, CostUnit(unit)),
                    Money(tally.estimated, CostUnit(unit)) if tally.estimated else None,
                )
                for (gateway, unit), tally in sorted(others.items())
            ),
            unpriced=tuple(Unpriced(gateway, n) for gateway, n in sorted(unpriced.items())),
            not_billed=not_billed,
        )


def _name(gateway: str | None) -> str:
    return gateway or "the gateway"


def conversation_spend(conversation_pk: int) -> SpendLine:
    """The conversation's settled generations still in the ledger (folded ones have no
    conversation)."""
    rows = (
        Generation.objects.filter(conversation_id=conversation_pk)
        .exclude(cost_source=Generation.CostSource.PENDING)
        .values_list("gateway__name", "cost", "cost_unit", "cost_source")
    )
    return SpendLine.of(
        (_name(gateway), unit if cost is not None else "", Tally.of(cost, source))
        for gateway, cost, unit, source in rows
    )


def month_spend(user: User, now: datetime.datetime | None = None) -> SpendLine:
    """This month's (in the server's TIME_ZONE): the user's running totals, kept by the user on
    each generation (so deleting a conversation changes nothing), folded days included."""
    _, month = period_starts(now or timezone.now())
    names = Gateway.objects.filter(pk=OuterRef("gateway_key")).values("name")[:1]
    rows = SpendTotal.objects.filter(
        scope=SpendTotal.Scope.USER, scope_key=user.pk, period=SpendTotal.Period.MONTH, start=month
    ).annotate(gateway_name=Subquery(names))
    return SpendLine.of((_name(row.gateway_name), row.unit, Tally.of_row(row)) for row in rows)
