"""The units gateways bill in, exact amounts in them, and how each one reads.

The four gateways charge in different units (Numes: the key's currency, USD credits or satoshis;
Osmexo: micro-USD; Nodul: PnP; tiny-3b: credits), so amounts are only ever added within one unit.
Amounts are `Decimal`s: a JSON number arrives as a float, and `Decimal(repr(float))` gives back the
literal the gateway wrote for any literal of up to 15 significant digits (every documented amount
is far shorter), where `Decimal(float)` would give its binary approximation.

An operator may set rates to one display currency (`CHAT_COST_RATES`); totals are then also shown
converted, and always marked as such.

A unit is what a gateway's `usage.cost` counts in (its row's `cost_unit`, its dialect's default),
so it stands here with the gateway, below `costs`, which adds up and limits amounts in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import models

from gateway_client.dialects import facts_for

__all__ = ["CostUnit", "Money", "default_unit", "exact", "in_dollars", "is_dollars", "stream_unit"]


class CostUnit(models.TextChoices):
    USD = "usd", "US dollars"
    MICRO_USD = "micro_usd", "micro-USD"
    SAT = "sat", "satoshis"
    PNP = "pnp", "PnP"
    CREDITS = "credits", "credits"


_MICRO = Decimal("0.000001")
_CENT = Decimal("0.01")
_SUFFIX = {CostUnit.SAT: "sat", CostUnit.PNP: "PnP", CostUnit.CREDITS: "credits"}


def is_dollars(unit: str) -> bool:
    """Whether amounts in `unit` are dollars exactly (micro-USD are): added up with each other."""
    return unit in (CostUnit.USD, CostUnit.MICRO_USD)


def in_dollars(amount: Decimal, unit: str) -> Decimal:
    """`amount`, in `unit` (one that `is_dollars`), in dollars."""
    return amount * _MICRO if unit == CostUnit.MICRO_USD else amount


def default_unit(dialect: str | None) -> CostUnit:
    """What a gateway of `dialect` bills in unless its key says otherwise (Numes BTC keys: sat):
    the dialect table's `default_unit`, credits for a dialect it does not know."""
    facts = facts_for(dialect)
    return CostUnit(facts.default_unit) if facts is not None else CostUnit.CREDITS


def stream_unit(reported: str, gateway_unit: str) -> CostUnit:
    """The unit of an amount the client read: `micro_usd` (Osmexo's `x_llm_cost_micro`) is one,
    `credits` (`usage.cost`, "the key's currency") is whatever the gateway is configured to bill."""
    if reported == "micro_usd":
        return CostUnit.MICRO_USD
    return CostUnit(gateway_unit) if gateway_unit in CostUnit.values else CostUnit.CREDITS


def exact(amount: int | float | str | Decimal) -> Decimal:
    if isinstance(amount, float):
        return Decimal(repr(amount))
    return Decimal(amount)


def _digits(amount: Decimal, min_places: int = 0) -> str:
    text = format(amount.normalize(), "f") if amount else "0"
    whole, _, places = text.partition(".")
    places = places.ljust(min_places, "0")
    return f"{whole}.{places}" if places else whole


@dataclass(frozen=True, slots=True)
class Money:
    """An exact amount in one unit."""

    amount: Decimal
    unit: CostUnit

    def __str__(self) -> str:
        match self.unit:
            case CostUnit.USD:
                return "$" + _digits(self.amount, 2)
            case CostUnit.MICRO_USD:  # micro-USD reads as dollars: 130 -> $0.000130
                return "$" + _digits(self.amount * _MICRO, 6)
            case CostUnit.SAT:
                return f"{_digits(self.amount)} sat"
            case CostUnit.PNP:
                return f"{_digits(self.amount)} PnP"
        return f"{_digits(self.amount)} credits"

    def rounded(self) -> str:
        """For a person to read (the admin keeps `str`'s exact figures): three significant
        digits below one, cents (hundredths) above; a dollar amount with at least two places,
        and never rounded to nothing: $0.00702, $0.17, $12.35, 0.000322 PnP, 1,234.5 sat."""
        dollars = is_dollars(self.unit)
        amount = in_dollars(self.amount, self.unit)
        if abs(amount) >= 1 or not amount:
            shown = amount.quantize(_CENT, ROUND_HALF_UP)
        else:
            digits = amount.adjusted()  # -3 for 0.00702
            shown = amount.quantize(Decimal(1).scaleb(digits - 2), ROUND_HALF_UP)
        text = f"{shown:,f}"
        if not dollars:
            text = text.rstrip("0").rstrip(".") if "." in text else text
            return f"{text} {_SUFFIX[self.unit]}"
        whole, _, places = text.partition(".")
        return f"${whole}.{places.rstrip('0').ljust(2, '0')}"

    def converted(self) -> Money | None:
        """In the operator's display currency, when they set a rate for this unit."""
        rate = rates().get(self.unit)
        return None if rate is None else Money(self.amount * rate, CostUnit.USD)


def rates() -> dict[str, Decimal]:
    """`CHAT_COST_RATES`, e.g. "sat=0.00095,pnp=1.2": US dollars per unit."""
    found: dict[str, Decimal] = {CostUnit.MICRO_USD: _MICRO, CostUnit.USD: Decimal(1)}
    for item in settings.CHAT_COST_RATES.split(","):
        unit, _, rate = item.partition("=")
        if unit.strip() in CostUnit.values and rate.strip():
            found[unit.strip()] = Decimal(rate.strip())
    return found
