"""Cost units: exact amounts, how each unit reads, and what a stream's amount is counted in."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from chatapp.gateways.units import CostUnit, Money, default_unit, exact, stream_unit


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (0.0000081, "0.0000081"),
        (130, "130"),
        (0.1, "0.1"),
        ("0.000000123456789", "0.000000123456789"),
    ],
)
def test_exact_keeps_the_literal_the_gateway_wrote(amount: Any, expected: str) -> None:
    assert exact(amount) == Decimal(expected)
    assert exact(0.1) != Decimal.from_float(0.1), "not the float's binary approximation"


def test_many_tiny_amounts_add_up_exactly() -> None:
    assert sum((exact(0.0000081) for _ in range(100_000)), Decimal(0)) == Decimal("0.81")


@pytest.mark.parametrize(
    ("amount", "unit", "text"),
    [
        ("130", CostUnit.MICRO_USD, "$0.000130"),
        ("1234567", CostUnit.MICRO_USD, "$1.234567"),
        ("0.0000081", CostUnit.PNP, "0.0000081 PnP"),
        ("120", CostUnit.SAT, "120 sat"),
        ("0.5", CostUnit.USD, "$0.50"),
        ("0.000171600000000", CostUnit.USD, "$0.0001716"),
        ("0", CostUnit.USD, "$0.00"),
        ("12.50", CostUnit.CREDITS, "12.5 credits"),
    ],
)
def test_each_unit_reads_as_its_gateway_bills(amount: str, unit: CostUnit, text: str) -> None:
    assert str(Money(Decimal(amount), unit)) == text


def test_conversion_needs_a_rate_except_for_micro_usd(settings: Any) -> None:
    settings.CHAT_COST_RATES = "sat=0.001, pnp = 2 ,bogus=3"
    assert Money(Decimal(130), CostUnit.MICRO_USD).converted() == Money(
        Decimal("0.000130"), CostUnit.USD
    )
    assert Money(Decimal(120), CostUnit.SAT).converted() == Money(Decimal("0.120"), CostUnit.USD)
    assert Money(Decimal("0.5"), CostUnit.PNP).converted() == Money(Decimal("1.0"), CostUnit.USD)
    assert Money(Decimal(3), CostUnit.CREDITS).converted() is None


def test_a_streamed_amount_is_in_the_gateways_unit_unless_it_names_its_own() -> None:
    assert stream_unit("micro_usd", "usd") == CostUnit.MICRO_USD
    assert stream_unit("credits", "sat") == CostUnit.SAT, "usage.cost: the key's currency"
    assert stream_unit("credits", "") == CostUnit.CREDITS
    assert [default_unit(d) for d in ("numes", "osmexo", "tiny", "nodul", None)] == [
        CostUnit.USD,
        CostUnit.MICRO_USD,
        CostUnit.CREDITS,
        CostUnit.PNP,
        CostUnit.CREDITS,
    ]
