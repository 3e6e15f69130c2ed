"""Exact amounts in the admin without the 15 decimal places their columns keep: "0.0004", not
"0.000400000000000" (#45). The admin shows exact figures (the user's spend line rounds them,
`Money.rounded`); trailing zeros dropped change no value. For the read-only amounts of a
generation (`trimmed`) and for the amounts an admin edits (`TRIMMED_DECIMALS`, a `ModelAdmin`'s
`formfield_overrides`)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.db import models

from chatapp.costs.csv_file import plain

__all__ = ["TRIMMED_DECIMALS", "TrimmedDecimalField", "trimmed"]


def trimmed(value: Decimal | None) -> str:
    """`value` exactly, without trailing zeros ("-" for none)."""
    if value is None:
        return "-"
    return plain(value) if value else "0"  # the CSV's exact figure; a zero of any sign is "0"


class TrimmedDecimalField(forms.DecimalField):
    """A decimal form field whose stored value is shown trimmed in its input."""

    def prepare_value(self, value: Any) -> Any:
        return trimmed(value) if isinstance(value, Decimal) else super().prepare_value(value)


TRIMMED_DECIMALS: dict[type[models.Field[Any, Any]], dict[str, Any]] = {
    models.DecimalField: {"form_class": TrimmedDecimalField}
}
