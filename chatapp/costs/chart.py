"""Daily spend as an SVG bar chart drawn on the server: no script, no CDN, nothing for the CSP to
block (presentation attributes only, never a `style` attribute, which the CSP forbids).

One panel per unit with its own scale, since amounts in different units share no axis; in each,
a bar per day, stacked by series: the unit itself, or each model or user group (the biggest few,
the rest drawn together). Model and group names are chosen by gateways and admins, so every text
is escaped. A generation counts in each of its groups, so bars per group can stack up to more than
was spent: the panel's title then says what it adds up.
"""

from __future__ import annotations

import datetime
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from decimal import Decimal

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from chatapp.costs.summary import DailyAmount
from chatapp.gateways.units import CostUnit, Money

__all__ = ["MAX_SERIES", "draw"]

WIDTH = 760
LEFT, RIGHT = 104, 12  # room for the amounts on the axis
PLOT_HEIGHT = 120
TITLE_HEIGHT = 20
LEGEND_ROW = 16
LEGEND_COLUMNS = 4
AXIS_HEIGHT = 20
AXIS_GAP = 10  # between the title or legend and the top label of the axis
PANEL_GAP = 18
MAX_SERIES = 6  # per panel; the rest are drawn as one "other models" series
NAME_LENGTH = 26  # legend names are cut here; a bar's tooltip has the whole name
# Okabe-Ito: told apart with the common colour-vision deficiencies; grey is "other".
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
OTHER = "#999999"
OTHER_NAME = "other models"
OTHER_GROUPS = "other groups"

type _Bars = dict[str, dict[datetime.date, Decimal]]  # series -> day -> amount


def _text(x: float, y: float, content: str, anchor: str = "start", size: int = 11) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="currentColor">{escape(content)}</text>'
    )


def _shortened(name: str) -> str:
    return name if len(name) <= NAME_LENGTH else name[: NAME_LENGTH - 1] + "…"


def _axis_top(peak: Decimal) -> Decimal:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above `peak`: round axis labels."""
    if peak <= 0:
        return Decimal(1)
    for step in (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5), Decimal(10)):
        if (top := step.scaleb(peak.adjusted())) >= peak:
            return top
    raise AssertionError("unreachable: 10 times the power of ten is above any peak")


def _series(
    bars: _Bars, other_name: str = OTHER_NAME
) -> list[tuple[str, str, dict[datetime.date, Decimal]]]:
    """(name, colour, amounts) per series, biggest first, with the tail folded into one."""
    ranked = sorted(bars.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    if len(ranked) > MAX_SERIES:
        head, tail = ranked[: MAX_SERIES - 1], ranked[MAX_SERIES - 1 :]
        other: dict[datetime.date, Decimal] = defaultdict(Decimal)
        for _, amounts in tail:
            for day, amount in amounts.items():
                other[day] += amount
        ranked = [*head, (other_name, other)]
    return [
        (name, OTHER if name == other_name else PALETTE[index % len(PALETTE)], amounts)
        for index, (name, amounts) in enumerate(ranked)
    ]


def _panel(
    unit: CostUnit, bars: _Bars, days: Sequence[datetime.date], top_y: float, per_group: bool
) -> tuple[str, float]:
    """One unit's panel from `top_y` down, and where it ends."""
    series = _series(bars, OTHER_GROUPS if per_group else OTHER_NAME)
    named = len(series) > 1 or per_group  # one group is still named: which is it?
    legend_rows = math.ceil(len(series) / LEGEND_COLUMNS) if named else 0
    plot_top = top_y + TITLE_HEIGHT + legend_rows * LEGEND_ROW + AXIS_GAP
    baseline = plot_top + PLOT_HEIGHT
    plot_width = WIDTH - LEFT - RIGHT
    step = plot_width / len(days)
    daily = [
        sum((amounts.get(day, Decimal(0)) for _, _, amounts in series), Decimal(0)) for day in days
    ]
    top = _axis_top(max(daily))
    scale = float(top)
    total = sum(daily, Decimal(0))
    title = f"{unit.label}: {Money(total, unit)} in the range"
    if per_group:
        title = f"{unit.label}: {Money(total, unit)} added over the groups, in the range"
    parts = [_text(0, top_y + 14, title, size=12)]
    if legend_rows:
        column_width = (WIDTH - LEFT) / LEGEND_COLUMNS
        for index, (name, colour, _) in enumerate(series):
            x = LEFT + (index % LEGEND_COLUMNS) * column_width
            y = top_y + TITLE_HEIGHT + (index // LEGEND_COLUMNS) * LEGEND_ROW
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 2:.1f}" width="10" height="10" fill="{colour}"/>'
            )
            parts.append(_text(x + 14, y + 11, _shortened(name)))
    for fraction in (Decimal(0), Decimal("0.5"), Decimal(1)):
        y = baseline - float(fraction) * PLOT_HEIGHT
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            f'stroke="currentColor" stroke-opacity="0.2"/>'
        )
        parts.append(_text(LEFT - 6, y + 4, str(Money(top * fraction, unit)), anchor="end"))
    label_every = math.ceil(len(days) / 8)
    for index, day in enumerate(days):
        x = LEFT + index * step
        y = baseline
        for name, colour, amounts in series:
            amount = amounts.get(day)
            if not amount:
                continue
            height = float(amount) / scale * PLOT_HEIGHT
            y -= height
            tip = f"{day.isoformat()} · {name}: {Money(amount, unit)}"
            parts.append(
                f'<rect x="{x + step * 0.1:.2f}" y="{y:.2f}" width="{max(step * 0.8, 1):.2f}" '
                f'height="{max(height, 0.5):.2f}" fill="{colour}">'
                f"<title>{escape(tip)}</title></rect>"
            )
        if index % label_every == 0:
            parts.append(_text(x + step / 2, baseline + 14, f"{day:%b} {day.day}", anchor="middle"))
    return "\n".join(parts), baseline + AXIS_HEIGHT


def draw(
    points: Iterable[DailyAmount], days: Sequence[datetime.date], *, per_group: bool = False
) -> SafeString:
    """The chart of `points` over `days` (every day of the range, spent on or not); "" without
    any amount to draw. `per_group`: the series are user groups, which overlap."""
    by_unit: dict[CostUnit, _Bars] = defaultdict(lambda: defaultdict(dict))
    shown = set(days)
    for point in points:
        if point.day in shown:
            amounts = by_unit[point.unit][point.series]
            amounts[point.day] = amounts.get(point.day, Decimal(0)) + point.amount
    if not days or not by_unit:
        return mark_safe("")
    panels = []
    y = 0.0
    for unit in CostUnit:
        if unit in by_unit:
            panel, bottom = _panel(unit, by_unit[unit], days, y, per_group)
            panels.append(panel)
            y = bottom + PANEL_GAP
    height = y - PANEL_GAP
    # Everything interpolated below is a number, a colour of ours or passed through escape().
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="cost-chart" viewBox="0 0 {WIDTH} '
        f'{height:.0f}" width="100%" font-family="sans-serif" role="img" '
        f'aria-labelledby="cost-chart-title"><title id="cost-chart-title">Daily spend, per '
        f"unit</title>\n" + "\n".join(panels) + "\n</svg>"
    )
