"""A turn that calls tools, in real Chromium: each round's calls in its pane (name, arguments,
status, duration, result), the rounds one after another with their own costs, the answer from
the results, and a reload mid-loop that comes back to the current round with the earlier ones.

With `CHAT_SCREENSHOTS` set to a directory, the finished loop is saved there at desktop and phone
sizes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import ROOT, offer_model, screenshots, send

pytestmark = [pytest.mark.browser, pytest.mark.paced]


def manage_shell(env: dict[str, str], code: str) -> None:
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", code]
    subprocess.run(command, env=env, cwd=ROOT, check=True, capture_output=True)


@pytest.fixture
def calculator_by_default(server_env: dict[str, str]) -> Iterator[None]:
    """alice's new chats offer the calculator (the Tools control's own tests set it by hand)."""
    manage_shell(
        server_env,
        "from chatapp.assistants.models import ChatDefaults; "
        "from django.contrib.auth.models import User; "
        "ChatDefaults.objects.update_or_create(user=User.objects.get(username='alice'), "
        "defaults={'tools': ['calculator']})",
    )
    yield
    manage_shell(
        server_env,
        "from chatapp.assistants.models import ChatDefaults; ChatDefaults.objects.all().delete()",
    )


def record_statuses(page: Any) -> None:
    """Keep every status a live tool pane shows, as it shows it."""
    page.evaluate(
        """() => {
            window.toolStatuses = [];
            new MutationObserver(() => {
                const live = 'article.assistant[data-status="streaming"] .tool-status';
                for (const el of document.querySelectorAll(live)) {
                    const seen = window.toolStatuses;
                    if (el.textContent && seen[seen.length - 1] !== el.textContent) {
                        seen.push(el.textContent);
                    }
                }
            }).observe(document.body,  // a new chat swaps in a new #messages
                       {subtree: true, childList: true, characterData: true});
        }"""
    )


def loaded_at(page: Any, scroll_top: str) -> None:
    """The page reloaded (at the size just set) with its messages scrolled to `scroll_top`."""
    page.reload()
    expect(page.locator("article.assistant").last.locator(".content.rendered")).to_be_visible()
    page.evaluate(
        f"() => {{ const box = document.getElementById('messages'); "
        f"box.scrollTop = {scroll_top}; }}"
    )


def rounds(page: Any, count: int) -> Any:
    """The answers of the turn once `count` rounds are written (the last one finished)."""
    answers = page.locator("article.assistant")
    expect(answers).to_have_count(count, timeout=30_000)
    expect(answers.last).to_have_attribute("data-status", "completed", timeout=30_000)
    for i in range(count):
        expect(answers.nth(i).locator(".content")).to_have_class(re.compile(r"\brendered\b"))
    return answers


def assert_ran(answer: Any) -> str:
    """The answer's one call ran: its pane says so; the result, which it returns, is shown."""
    call = answer.get_by_role("region", name="Tool calls").locator(".tool-call")
    expect(call).to_have_count(1)
    expect(call.locator(".tool-name")).to_have_text("calculator")
    expect(call.locator(".tool-status")).to_have_text(re.compile(r"^(done|error) · [\d,]+ ms$"))
    arguments = call.locator(".tool-args").inner_text()
    assert "\n" in arguments, "pretty-printed once complete"
    assert isinstance(json.loads(arguments), dict)
    result = call.locator(".tool-result")
    result.locator("summary").click()
    text: str = result.locator("pre").inner_text()
    assert text
    return text


def test_a_two_round_loop_shows_each_round_and_answers_from_the_results(
    alice: Any, calculator_by_default: None
) -> None:
    alice.goto(alice.url)  # the page the fixture opened, now with the new defaults
    record_statuses(alice)
    # Slow enough that the new chat's socket is attached while the rounds still stream, even on
    # a starved machine; at the default pace a late socket found all three rounds finished.
    model = "emulator/tools?rounds=2&tokens_per_second=10"
    offer_model(alice, model)
    send(alice, "What is 6 times 7?", model)
    answers = rounds(alice, 3)
    first, second = assert_ran(answers.nth(0)), assert_ran(answers.nth(1))
    final = answers.nth(2)
    expect(final.get_by_role("region", name="Tool calls")).to_be_hidden()
    expect(final.locator(".content")).to_contain_text(second)
    # Each round is its own generation: a cost under each.
    for i in range(3):
        expect(answers.nth(i).locator(".meta")).to_contain_text("$")
    expect(answers.nth(1)).to_have_class(re.compile(r"\btool-round\b"))
    statuses = alice.evaluate("window.toolStatuses")
    assert "running…" in statuses, "a run is shown as it starts"
    assert any(s.startswith(("done", "error")) for s in statuses), "and as it ends, live"
    assert first
    # The turn from its top (the first round's pane) and at its end, each loaded at its size.
    screenshots(alice, "tool-loop-top", lambda page: loaded_at(page, "0"))
    screenshots(alice, "tool-loop-end", lambda page: loaded_at(page, "box.scrollHeight"))


def test_a_reload_mid_loop_comes_back_to_the_current_round(
    alice: Any, calculator_by_default: None
) -> None:
    alice.goto(alice.url)
    offer_model(alice, "emulator/tools?tokens_per_second=8")
    send(alice, "What is 6 times 7?", "emulator/tools?tokens_per_second=8")
    answers = alice.locator("article.assistant")
    expect(answers).to_have_count(2, timeout=30_000)
    expect(answers.nth(1)).to_have_attribute("data-status", "streaming")
    expect(answers.nth(1).locator(".content")).not_to_be_empty()
    alice.reload()
    answers = alice.locator("article.assistant")
    expect(answers).to_have_count(2)
    result = assert_ran(answers.nth(0))
    expect(answers.nth(1)).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answers.nth(1).locator(".content")).to_contain_text(result)
    text = answers.nth(1).locator(".content").inner_text()
    assert text.count("So, in short") == 1, "no gap, no duplicate"
