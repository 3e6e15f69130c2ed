"""Model output that tries to run script or to smuggle events, rendered in real Chromium from the
real Daphne server (`scripted_gateway.INJECTIONS` and `FRAMINGS`).

Every payload that could run sets `window.__xss` (or its parent's); it must stay unset, and no
Content-Security-Policy violation may be reported either (the policy is the second line of
defence: a violation means markup got past the first). The answer stored is exactly what the
model sent as content, every SMUGGLED marker the page shows is one the content carried, and
framing around the chunks adds nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import send
from tests.multiprocess.servers import Server, User

from .scripted_gateway import FRAMING_SHOWN, FRAMINGS, INJECTIONS

pytestmark = [pytest.mark.browser]

NEXT_FRAME = "() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)))"
WATCH_FOR_SCRIPT = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective}: ${event.sample || event.blockedURI}`);
});
"""


@pytest.fixture
def page(browser: Any, server: Server, victim: User) -> Iterator[Any]:
    context = browser.new_context()
    cookies = victim.cookies.items()
    context.add_cookies([{"name": k, "value": v, "url": server.url} for k, v in cookies])
    context.add_init_script(WATCH_FOR_SCRIPT)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{server.url}/")
    yield page
    context.close()


def answered(page: Any, model: str) -> tuple[Any, str]:
    """Send a message with `model`; its answer once finished, and its source (what is stored)."""
    answer = send(page, "Say something", model)
    expect(answer).not_to_have_attribute("data-status", "streaming")
    source = page.evaluate(
        "async (pk) => (await fetch(`/m/${pk}/source/`)).text()",
        answer.get_attribute("data-message"),
    )
    return answer, source


def nothing_ran(page: Any) -> None:
    page.evaluate(NEXT_FRAME)
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("window.__violations") == []


@pytest.mark.parametrize("model", list(INJECTIONS))
def test_content_that_tries_to_escape_is_shown_as_sent_and_runs_nothing(
    page: Any, model: str
) -> None:
    sent = "".join(INJECTIONS[model])
    answer, source = answered(page, model)
    assert answer.get_attribute("data-status") == "completed"
    assert source == sent
    box = answer.locator(".content")
    for selector in ("script", "img", "svg", "iframe", "[onerror]", "[onload]", "a[href^=java]"):
        assert box.locator(selector).count() == 0, selector
    for selector in ("math [href]", "math [style]", "math [class]", "maction", "semantics"):
        assert box.locator(selector).count() == 0, selector
    if model == "inject-math":  # the payloads went through MathML, not around it
        assert box.locator("math").count() == 6
    shown = box.inner_text()
    assert shown.count("SMUGGLED") == sent.count("SMUGGLED")
    for tag in ("<script>", "onerror=", "<svg onload=", "<iframe srcdoc="):
        assert shown.count(tag) == sent.count(tag), tag  # shown as the text it is
    nothing_ran(page)
    page.reload()  # the final render, from the database
    box = page.locator(f"#message-{answer.get_attribute('data-message')} .content")
    assert box.inner_text().count("SMUGGLED") == sent.count("SMUGGLED")
    nothing_ran(page)


@pytest.mark.parametrize("model", list(FRAMINGS))
def test_framing_around_chunks_adds_no_text(page: Any, model: str) -> None:
    answer, source = answered(page, model)
    assert source == FRAMING_SHOWN[model]
    assert answer.locator(".content").inner_text().strip() == FRAMING_SHOWN[model].strip()
    nothing_ran(page)
