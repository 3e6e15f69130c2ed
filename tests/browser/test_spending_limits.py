"""Spending limits in Chromium: the sidebar says what is left, the figure and the 80% warning
under the composer follow an answer's cost as it settles (pushed over the page's socket, no
reload), an answer whose full budget does not fit is asked for what is left and says so where it
stops, and one that cannot fit at all is refused in the composer in words (#45)."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.multiprocess.servers import ROOT

from .conftest import PASSWORD, screenshots, send, sign_in

pytestmark = [pytest.mark.browser]

USERNAME = "erin"
SEED = f"""
from decimal import Decimal
from django.contrib.auth import get_user_model

from chatapp.costs.models import Generation, SpendingLimit
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways import configs
user = get_user_model().objects.create_user({USERNAME!r}, password={PASSWORD!r})
_, default_pk = configs.configs(force=True)
row = Gateway.objects.get(pk=default_pk)
for model, price in [("emulator/chat", "0.00001"), ("emulator/long", "0.001")]:
    ModelPrice.objects.update_or_create(
        gateway=row,
        model=model,
        # Set as an admin would: a /models listing fetched later never overwrites it.
        defaults={{"prompt": Decimal(price), "completion": Decimal(price), "source": "admin"}},
    )
SpendingLimit.objects.create(user=user, unit="usd", period="month", amount=Decimal(1))
# Just under 80%: the next answer's cost (a few hundred-thousandths) crosses it.
Generation.objects.create(
    user=user, gateway=row, model="emulator/chat", status="completed",
    cost=Decimal("0.79999"), cost_unit="usd", cost_source="stream",
)
"""


@pytest.fixture(scope="module")
def limited_user(server_env: dict[str, str]) -> str:
    """A user of this module's own, with a limit of $1 a month of which $0.79999 is used."""
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", SEED]
    subprocess.run(command, env=server_env, cwd=ROOT, check=True, capture_output=True)
    return USERNAME


def open_drawer(page: Any) -> None:
    """On a phone the sidebar is a drawer: open it, so that its figures are in the picture."""
    button = page.locator("[data-drawer-open]")
    if button.is_visible():
        button.click()
        page.wait_for_function(
            "() => document.getElementById('sidebar').getBoundingClientRect().left >= 0"
            " && document.getAnimations().every(a => a.playState !== 'running')"
        )
        expect(page.locator("#sidebar-spend")).to_be_in_viewport()


def close_drawer(page: Any) -> None:
    button = page.locator("[data-drawer-close]")
    if button.is_visible():
        button.click()


def test_the_left_figure_and_the_warning_follow_a_settled_cost(
    browser: Any, server_url: str, limited_user: str
) -> None:
    page = sign_in(browser, server_url, limited_user)
    try:
        left = page.locator("#sidebar-spend .limit-left")
        expect(left).to_have_text("$0.20 of $1.00 left this month")  # $0.20001, rounded
        expect(page.locator("#limit-warning")).to_be_empty()

        answer = send(page, "Say hello.", "emulator/chat")
        expect(answer).to_have_attribute("data-status", "completed", timeout=20_000)
        # The cost settled: past 80%, the warning appears in place, with no page load.
        warning = page.locator("#limit-warning")
        expect(warning).to_contain_text(
            "You have used 80% of your spending limit this month: $0.20 left; it resets on 1 ",
            timeout=10_000,
        )
        expect(left).to_have_class(re.compile(r"\bnear\b"))
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1

        # Its full budget (4,096 tokens at $0.001) does not fit the $0.20 left: it is asked for
        # what is left instead, and says so where it stops.
        page.goto(f"{server_url}/")
        long = send(page, "Tell me everything.", "emulator/long")
        expect(long).to_have_attribute("data-status", "completed", timeout=30_000)
        expect(long).to_contain_text(
            re.compile(
                r"The answer was cut off at the budget \(\d+ tokens, all that your spending "
                r"limit had left allowed\)\."
            )
        )

        # Not even a short answer fits after a prompt this long: refused before it is sent.
        refused = send_refused(page, "Tell me everything. " * 60, "emulator/long")
        assert re.fullmatch(
            r"Even a short answer \(64 tokens\) to this conversation would cost about "
            r"\$0\.\d+, more than the \$0\.20 left of your spending limit of \$1\.00 a month; "
            r"it resets on 1 \w+ at 00:00 UTC\.",
            refused,
        ), refused
        screenshots(page, "spending-limits", close_drawer)
        screenshots(page, "spending-limits-sidebar", open_drawer)
    finally:
        page.context.close()


def send_refused(page: Any, text: str, model: str) -> str:
    """Send `text` with `model`, expecting a refusal: the composer's error line."""
    option = page.locator(f'#model option[value$=":{model}"]').first
    page.get_by_label("Model").select_option(option.get_attribute("value"))
    answers = page.locator("article.assistant").count()
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")
    error = page.locator("#composer-error")
    expect(error).not_to_be_empty(timeout=15_000)  # a loaded machine: a condition, not a speed
    assert page.locator("article.assistant").count() == answers
    return str(error.inner_text())
