"""Groups in Chromium: a member of a group with a policy sees only the models it allows in the
picker, a send naming another (a forged option) is refused in words by the server, the sidebar
shows the group's budget and follows a settled cost, and an answer past the group's limit is
refused in the composer in words."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.multiprocess.servers import ROOT

from .conftest import PASSWORD, screenshots, send, sign_in
from .test_spending_limits import close_drawer, open_drawer, send_refused

pytestmark = [pytest.mark.browser]

MEMBER, OTHER_MEMBER = "gwen", "hank"
SEED = f"""
from decimal import Decimal
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from chatapp.access.models import GroupPolicy
from chatapp.costs.models import Generation, SpendingLimit
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways import configs
users = get_user_model().objects
member = users.create_user({MEMBER!r}, password={PASSWORD!r})
other = users.create_user({OTHER_MEMBER!r}, password={PASSWORD!r})
_, default_pk = configs.configs(force=True)
row = Gateway.objects.get(pk=default_pk)
for model, price in [("emulator/chat", "0.00001"), ("emulator/long", "0.001")]:
    ModelPrice.objects.update_or_create(
        gateway=row,
        model=model,
        defaults={{"prompt": Decimal(price), "completion": Decimal(price), "source": "admin"}},
    )
group = Group.objects.create(name="Team Research")
GroupPolicy.objects.create(
    group=group, model_patterns="emulator/chat\\nemulator/long", tool_patterns="calculator"
)
SpendingLimit.objects.create(group=group, unit="usd", period="month", amount=Decimal(1))
member.groups.add(group)
other.groups.add(group)
# The other member's spend, recorded as the group's: $0.20 is left for both, just under 80% used.
Generation.objects.create(
    user=other, gateway=row, model="emulator/chat", status="completed",
    cost=Decimal("0.79999"), cost_unit="usd", cost_source="stream",
)
"""


@pytest.fixture(scope="module")
def member(server_env: dict[str, str]) -> str:
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", SEED]
    subprocess.run(command, env=server_env, cwd=ROOT, check=True, capture_output=True)
    return MEMBER


def test_a_member_sees_the_groups_models_and_budget_and_is_refused_past_it(
    browser: Any, server_url: str, member: str
) -> None:
    page = sign_in(browser, server_url, member)
    try:
        offered = page.locator("#model option").evaluate_all(
            "options => options.map(o => o.value.replace(/^g\\d+:/, ''))"
        )
        assert sorted(offered) == ["emulator/chat", "emulator/long"]
        left = page.locator("#sidebar-spend .limit-left")
        expect(left).to_have_text("Team Research: $0.20 of $1.00 left this month")
        expect(page.locator("#limit-warning")).to_be_empty()

        answer = send(page, "Say hello.", "emulator/chat")
        expect(answer).to_have_attribute("data-status", "completed", timeout=20_000)
        # The cost settled: past 80% of the group's limit, the warning appears with no page load.
        expect(page.locator("#limit-warning")).to_contain_text(
            "You have used 80% of the Team Research group's spending limit this month"
        )

        # Past what the group has left even for a short answer: refused before it is sent.
        refused = send_refused(page, "Tell me everything. " * 60, "emulator/long")
        assert re.fullmatch(
            r"Even a short answer \(64 tokens\) to this conversation would cost about "
            r"\$0\.\d+, more than the \$0\.20 left of the Team Research group's spending "
            r"limit of \$1\.00 a month; it resets on 1 \w+ at 00:00 UTC\.",
            refused,
        ), refused
        screenshots(page, "groups", close_drawer)
        screenshots(page, "groups-sidebar", open_drawer)

        # The picker is a convenience: a model it does not offer, posted anyway, is refused.
        page.locator("#model option").first.evaluate(
            "(option) => { option.value = option.value.replace(/:.*/, ':emulator/echo') }"
        )
        page.get_by_label("Model").select_option(index=0)
        answers = page.locator("article.assistant").count()
        page.get_by_label("Message").fill("Echo this.")
        page.get_by_label("Message").press("Enter")
        expect(page.locator("#composer-error")).to_have_text(
            "Your group (Team Research) may not use 'emulator/echo' on Default gateway: "
            "choose another model."
        )
        assert page.locator("article.assistant").count() == answers
    finally:
        page.context.close()


def test_the_admin_sets_up_a_group_and_reads_its_spend(
    alice: Any, server_url: str, member: str
) -> None:
    """The Group page holds the policy and the limits; the cost summary has the group's table and
    chart series (alice is the suite's admin)."""
    alice.set_viewport_size({"width": 1280, "height": 900})
    alice.goto(f"{server_url}/admin/auth/group/")
    alice.get_by_role("link", name="Team Research").click()
    expect(alice.locator("#id_chat_policy-0-model_patterns")).to_have_value(
        "emulator/chat\nemulator/long"
    )
    expect(alice.locator("#id_spending_limits-0-amount")).to_have_value(re.compile(r"^1(\.0+)?$"))
    screenshots(alice, "admin-group")

    alice.goto(f"{server_url}/admin/chatapp/generation/summary/?series=group")
    table = alice.locator(".cost-table table", has_text="Per user group")
    expect(table.locator("th[scope=row]", has_text="Team Research")).to_be_visible()
    expect(alice.locator("#cost-chart svg")).to_contain_text("added over the groups")
    screenshots(
        alice,
        "admin-cost-summary-groups",
        lambda page: page.locator("#cost-chart").scroll_into_view_if_needed(),
    )
