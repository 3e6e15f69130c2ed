"""axe-core over the app's main pages and states, at the desktop and phone sizes: no serious or
critical violation (WCAG 2.2 A and AA, best practices included).

axe-core is installed by `make axe-core` (`npm ci` into tests/axe/node_modules, never copied into
the repository); without it, or when npm's registry could not be reached, this module skips
saying why. Each state is checked once its transitions have ended, as axe reads computed styles.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import SIZES, finished

pytestmark = [pytest.mark.browser]

AXE = Path(__file__).resolve().parents[1] / "axe" / "node_modules"
SERIOUS = ("serious", "critical")
CODE = "```python\n" + "print('" + "a wide line of code " * 12 + "')\n```"


def axe_source() -> str:
    if (AXE / ".unreachable").exists():
        pytest.skip((AXE / ".unreachable").read_text().strip())
    if not (AXE / ".installed").exists():
        pytest.skip("axe-core is not installed (make axe-core)")
    return (AXE / "axe-core" / "axe.min.js").read_text()


def violations(page: Any) -> list[str]:
    """Each serious or critical violation on `page` as one line: rule, impact, first targets."""
    page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')")
    if not page.evaluate("() => Boolean(window.axe)"):
        # Evaluated through the DevTools protocol: the page's CSP refuses inline scripts.
        page.evaluate("() => { " + axe_source() + "\n}")
    found = page.evaluate(
        """async () => (await axe.run(document, {
            runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa",
                                            "wcag22aa", "best-practice"]},
        })).violations.map(v => ({id: v.id, impact: v.impact,
                                 nodes: v.nodes.map(n => n.target.join(" ")).slice(0, 3)}))"""
    )
    return [
        f"{item['id']} ({item['impact']}): {json.dumps(item['nodes'])}"
        for item in found
        if item["impact"] in SERIOUS
    ]


def open_drawer(page: Any) -> None:
    page.get_by_role("button", name="Menu").click()
    expect(page.locator("#sidebar")).to_be_in_viewport()


def conversation(page: Any) -> None:
    finished(page, "hello there", "emulator/echo")


def code_block(page: Any) -> None:
    answer = finished(page, CODE, "emulator/echo")
    expect(answer.locator(".content pre")).to_be_visible()


STATES: dict[str, tuple[str, Callable[[Any], None] | None]] = {
    "home": ("/", None),
    "conversation": ("/", conversation),
    "code-block": ("/", code_block),
    "settings": ("/settings/", None),
    "prompts": ("/settings/prompts/", None),
}


@pytest.fixture(params=list(SIZES))
def size(request: pytest.FixtureRequest, alice: Any) -> str:
    width, height = SIZES[request.param]
    alice.set_viewport_size({"width": width, "height": height})
    return str(request.param)


@pytest.mark.parametrize("state", list(STATES))
def test_no_serious_violation(alice: Any, server_url: str, size: str, state: str) -> None:
    path, prepare = STATES[state]
    alice.goto(f"{server_url}{path}")
    if prepare is not None:
        prepare(alice)
    assert violations(alice) == []


def test_no_serious_violation_with_the_phone_drawer_open(alice: Any) -> None:
    width, height = SIZES["phone"]
    alice.set_viewport_size({"width": width, "height": height})
    finished(alice, "hello there", "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    open_drawer(alice)
    assert violations(alice) == []
