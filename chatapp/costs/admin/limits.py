"""The admin's spending limits (`spending_limits`): each with what is used so far and what is
left beside it, in this period; registered from `admin`."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin

from chatapp.costs.admin.amounts import TRIMMED_DECIMALS
from chatapp.costs.models import Generation, SpendingLimit
from chatapp.costs.spending_limits import Standing, period_bounds, standing
from chatapp.gateways.units import CostUnit, Money

if TYPE_CHECKING:
    _LimitAdmin = admin.ModelAdmin[SpendingLimit]
    _LimitForm = forms.ModelForm[SpendingLimit]
else:
    _LimitAdmin = admin.ModelAdmin
    _LimitForm = forms.ModelForm


class SpendingLimitForm(_LimitForm):
    class Meta:
        model = SpendingLimit
        fields: tuple[str, ...] = (
            "user",
            "gateway",
            "group",
            "unit",
            "period",
            "amount",
            "unknown_price",
        )
        help_texts = {
            "user": "One user's limit (it replaces the default of the same unit and period).",
            "gateway": "A gateway's limit, for all its users together.",
            "group": "A group's limit, shared by its members (it applies beside their own).",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        gateway, unit = data.get("gateway"), data.get("unit")
        scopes = [data.get(name) for name in ("user", "gateway", "group")]
        if sum(scope is not None for scope in scopes) > 1:
            raise forms.ValidationError(
                "A limit is for one user, one gateway or one group, or (with none) every user: "
                "not two of them."
            )
        if gateway is not None and unit and unit != gateway.cost_unit:
            billed = CostUnit(gateway.cost_unit).label
            raise forms.ValidationError(
                f"{gateway.name} bills in {billed}: a limit in {CostUnit(unit).label} would never "
                "count what it spends."
            )
        amount = data.get("amount")
        if amount is not None and amount < 0:
            self.add_error("amount", "A limit cannot be negative.")
        return data


def _standing(limit: SpendingLimit) -> tuple[str, Standing] | None:
    """Where `limit` stands, and for whom: the default's for the user who used the most of it
    this period (None: no one has used any)."""
    if limit.user_id is not None or limit.gateway_id is not None or limit.group_id is not None:
        return "", standing(limit, limit.user_id)
    start, _ = period_bounds(limit.period)
    users = (
        Generation.objects.filter(started_at__gte=start, user__isnull=False)
        .exclude(user__spending_limits__unit=limit.unit, user__spending_limits__period=limit.period)
        .values_list("user", "user__username")
        .distinct()
    )
    found = [(name, standing(limit, user_pk)) for user_pk, name in users]
    return max(found, key=lambda pair: pair[1].used, default=None)


@admin.register(SpendingLimit)
class SpendingLimitAdmin(_LimitAdmin):
    form = SpendingLimitForm
    formfield_overrides = TRIMMED_DECIMALS
    list_display = ("scope", "limit", "used_so_far", "left", "resets", "unknown_price")
    list_filter = ("unit", "period", "unknown_price")
    list_select_related = ("user", "gateway", "group")
    search_fields = ("user__username", "gateway__name", "group__name")

    @admin.display(description="for")
    def scope(self, obj: SpendingLimit) -> str:
        return obj.scope_label

    @admin.display(description="limit")
    def limit(self, obj: SpendingLimit) -> str:
        return f"{Money(obj.amount, CostUnit(obj.unit))} {obj.get_period_display()}"

    @admin.display(description="used so far")
    def used_so_far(self, obj: SpendingLimit) -> str:
        found = _standing(obj)
        if found is None:
            return str(Money(Decimal(0), CostUnit(obj.unit)))
        whom, state = found
        used = str(Money(state.used, state.unit))
        return f"{used} ({whom}, the most of any user)" if whom else used

    @admin.display(description="left")
    def left(self, obj: SpendingLimit) -> str:
        found = _standing(obj)
        left = obj.amount if found is None else found[1].left
        return str(Money(left, CostUnit(obj.unit)))

    @admin.display(description="resets")
    def resets(self, obj: SpendingLimit) -> str:
        _, resets = period_bounds(obj.period)
        return f"{resets:%Y-%m-%d %H:%M}"
