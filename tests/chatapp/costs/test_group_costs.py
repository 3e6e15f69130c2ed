"""The admin's cost history per user group (`costs/group_totals.py`): the summary's table, the
chart's series and the list's filter per group, and each generation's groups in the CSV. A
generation counts once in each group its user was in when it started; generations of no group
(and folded daily totals) are "(no group)"."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from chatapp.costs import chart as cost_chart
from chatapp.costs import group_totals, ledger
from chatapp.costs.models import Generation, LedgerDay
from chatapp.costs.summary import DailyAmount
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import CostUnit
from tests.chatapp.costs.test_admin_costs import (
    CHANGELIST,
    EXPORT,
    SUMMARY,
    _csv,
    admin,
    amounts,
    numes,
    record,
)

__all__ = ["admin", "numes"]  # fixtures, used by name

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def spend(alice: Any, bob: Any, django_user_model: Any, numes: Gateway) -> dict[str, Any]:
    """Alice in Research and Support, Bob in Support, Carol in none; one generation each, and one
    of Alice's from before she joined anything."""
    carol = django_user_model.objects.create_user("carol", password="x")
    early = record(alice, numes, cost="0.001", upstream_id="gen-early")
    research = Group.objects.create(name="Research")
    support = Group.objects.create(name="Support")
    alice.groups.add(research, support)
    bob.groups.add(support)
    return {
        "research": research,
        "support": support,
        "early": early,
        "alice": record(alice, numes, cost="0.25", upstream_id="gen-alice"),
        "bob": record(bob, numes, cost="0.5", upstream_id="gen-bob"),
        "carol": record(carol, numes, cost="2", upstream_id="gen-carol"),
    }


def test_each_group_totals_what_its_members_spent_while_in_it(spend: dict[str, Any]) -> None:
    found = group_totals.group_spend(Generation.objects.all())
    by_label = {group.label: (group.generations, amounts(group)) for group in found.groups}
    assert by_label == {
        "Research": (1, {"usd": Decimal("0.25")}),
        "Support": (2, {"usd": Decimal("0.75")}),
        "(no group)": (2, {"usd": Decimal("2.001")}),
    }
    # A generation of two groups counts in each: the rows add up to more than the total.
    assert sum(group.generations for group in found.groups) == 5 > Generation.objects.count()


def test_a_deleted_groups_spend_keeps_its_name(spend: dict[str, Any]) -> None:
    spend["support"].delete()
    labels = [group.label for group in group_totals.group_spend(Generation.objects.all()).groups]
    assert "Support (deleted)" in labels


def test_folded_totals_count_for_the_groups_they_were_spent_by(
    admin: Client, spend: dict[str, Any], alice: Any
) -> None:
    january = datetime.datetime(2026, 1, 5, tzinfo=datetime.UTC)
    record(alice, spend["alice"].gateway, cost="3", started=january, upstream_id="gen-old")
    ledger.fold(datetime.date(2026, 2, 1))
    assert not Generation.objects.filter(upstream_id="gen-old").exists()
    found = group_totals.group_spend(Generation.objects.all(), folded=LedgerDay.objects.all())
    by_label = {group.label: (group.generations, amounts(group)) for group in found.groups}
    assert by_label["Research"] == (2, {"usd": Decimal("3.25")})
    assert by_label["Support"] == (3, {"usd": Decimal("3.75")})
    assert by_label["(no group)"] == (2, {"usd": Decimal("2.001")})
    # The admin's filter and CSV read the folded day's groups too.
    query = {"group": spend["research"].pk, "started_from": "2026-01-01"}
    _, rows = _csv(admin.get(reverse(EXPORT), query))
    assert [(row["generation_id"], row["groups"], row["generations"]) for row in rows] == [
        ("", "Research; Support", "1"),
        ("gen-alice", "Research; Support", "1"),
    ]


def test_the_summary_has_a_table_per_group_with_links_to_the_list(
    admin: Client, spend: dict[str, Any]
) -> None:
    page = admin.get(reverse(SUMMARY))
    html = page.content.decode()
    assert "Per user group (a generation counts in each group its user was in" in html
    (table,) = [t for t in page.context["tables"] if t.heading == "group"]
    rows = {group.label: url for group, url in table.rows}
    assert set(rows) == {"Research", "Support", "(no group)"}
    listed = admin.get(rows["Support"])
    assert {g.upstream_id for g in listed.context["cl"].queryset} == {"gen-alice", "gen-bob"}
    nobody = admin.get(rows["(no group)"])
    assert {g.upstream_id for g in nobody.context["cl"].queryset} == {"gen-early", "gen-carol"}
    assert admin.get(reverse(CHANGELIST), {"group": "x"}).status_code in (200, 302)


def test_the_chart_has_a_series_per_group(admin: Client, spend: dict[str, Any]) -> None:
    page = admin.get(reverse(SUMMARY), {"series": "group"})
    chart = str(page.context["chart"])
    assert "Research: $0.25" in chart
    assert "Support: $0.75" in chart
    assert "(no group): $2.00" in chart
    assert "added over the groups, in the range" in chart
    assert "<strong>per user group</strong>" in page.content.decode()


def test_the_chart_folds_many_groups_into_other_groups() -> None:
    day = datetime.date(2026, 12, 1)
    points = [DailyAmount(day, CostUnit.USD, f"team {n}", Decimal(n + 1)) for n in range(9)]
    svg = str(cost_chart.draw(points, [day], per_group=True))
    assert "other groups" in svg
    assert "other models" not in svg
    one = str(cost_chart.draw(points[:1], [day], per_group=True))
    assert ">team 0</text>" in one, "a single group is named in a legend too"


def test_the_csv_names_each_generations_groups(admin: Client, spend: dict[str, Any]) -> None:
    _, rows = _csv(admin.get(reverse(EXPORT)))
    groups = {row["generation_id"]: row["groups"] for row in rows}
    assert groups == {
        "gen-early": "",
        "gen-alice": "Research; Support",
        "gen-bob": "Support",
        "gen-carol": "",
    }
    _, support = _csv(admin.get(reverse(EXPORT), {"group": spend["support"].pk}))
    assert sorted(row["generation_id"] for row in support) == ["gen-alice", "gen-bob"]
