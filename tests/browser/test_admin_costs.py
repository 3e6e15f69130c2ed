"""The admin's cost summary at 1280 px: every table fits beside the filter column, its Cost and
"of which estimated" columns whole, with long model names, four units and estimates in it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.multiprocess.servers import ROOT

from .conftest import screenshots

pytestmark = [pytest.mark.browser]

SEED = """
import datetime
from decimal import Decimal
from django.contrib.auth import get_user_model
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways.models import Gateway
owner = get_user_model().objects.create_user("carol.with.a.long.name@example.com")
units = {"usd": "Wide Numes", "micro_usd": "Wide Osmexo", "pnp": "Wide Nodul", "sat": "Wide BTC"}
models = ["anthropic/claude-sonnet-5-20261101", "osmexo/deepseek-r3-distill-llama-70b", "n/x"]
now = datetime.datetime.now(datetime.UTC)
for index in range(48):
    unit = list(units)[index % 4]
    # Disabled: the ledger needs the rows, and the pickers of the modules after this one do not.
    gateway, _ = Gateway.objects.get_or_create(
        name=units[unit],
        defaults={"base_url": "https://wide.example/v1", "cost_unit": unit, "enabled": False},
    )
    conversation = Conversation.objects.create(user=owner, gateway=gateway)
    answer = Message.objects.create(conversation=conversation, role="assistant")
    row = Generation.objects.create(
        message=answer, conversation=conversation, gateway=gateway, model=models[index % 3],
        status="completed", prompt_tokens=987654 + index, completion_tokens=123456,
        cost=Decimal("1331.250000162") / (index + 1), cost_unit=unit,
        cost_source="estimate" if index % 2 else "stream",
    )
    started = now - datetime.timedelta(days=index % 6)
    Generation.objects.filter(pk=row.pk).update(started_at=started)
"""


@pytest.fixture(scope="module")
def wide_ledger(server_env: dict[str, str]) -> None:
    """Generations of a user of their own (the ledger keeps them: other modules' users see
    none of them), with amounts of many digits in every unit."""
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", SEED]
    subprocess.run(command, env=server_env, cwd=ROOT, check=True, capture_output=True)


@pytest.mark.usefixtures("wide_ledger")
def test_the_cost_columns_are_visible_at_1280_px(alice: Any, server_url: str) -> None:
    alice.set_viewport_size({"width": 1280, "height": 800})
    alice.goto(f"{server_url}/admin/chatapp/generation/summary/")

    tables = alice.evaluate(
        """() => [...document.querySelectorAll('.cost-table')].map(module => {
            const table = module.querySelector('table');
            const cost = [...table.querySelectorAll('thead th')].at(-1);
            return {
                caption: table.caption.textContent,
                overflow: module.scrollWidth - module.clientWidth,
                costRight: cost.getBoundingClientRect().right,
            };
        })"""
    )

    assert [table["caption"] for table in tables] == [
        "Per day (UTC)",
        "Per model",
        "Per user",
        "Per gateway",
        "Per user group (a generation counts in each group its user was in when it started, so "
        "these can add up to more than the total)",
    ]
    for table in tables:
        assert table["overflow"] <= 0, f"{table['caption']} scrolls sideways"
        assert table["costRight"] <= 1280, f"{table['caption']}: its cost columns are cut"
    screenshots(
        alice,
        "admin-cost-summary",
        lambda page: page.locator(".cost-table").first.scroll_into_view_if_needed(),
    )
