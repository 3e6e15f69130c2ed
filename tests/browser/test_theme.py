"""The theme switch in real Chromium (static/chatapp/theme.js): System follows the system's
`prefers-color-scheme`; Light or Dark, chosen in the sidebar, is kept in this browser across
reloads, applied before the first paint, and followed by the sign-in page and the admin; the dark
theme's text and code are readable. And the sidebar's link to the admin, for staff only.

Set `CHAT_SCREENSHOTS` to a directory to keep the chat page's screenshots, light and dark.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.multiprocess.servers import ROOT

from .conftest import PASSWORD, finished, screenshots, sign_in

pytestmark = [pytest.mark.browser]

LIGHT_BG = "rgb(247, 247, 248)"  # chat.css --bg
DARK_BG = "rgb(22, 24, 29)"

# The theme on <html> when <body> is first added: what the first paint shows.
AT_FIRST_PAINT = """
new MutationObserver((changes, observer) => {
  if (!document.body) return;
  observer.disconnect();
  window.themeAtBody = document.documentElement.dataset.theme || "(none)";
}).observe(document, { childList: true, subtree: true });
"""

# WCAG's contrast ratio of an element's text colour on the background behind it.
CONTRAST = """el => {
  const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 4).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let back = el;
  while (back && rgb(getComputedStyle(back).backgroundColor)[3] === 0) back = back.parentElement;
  const fg = lum(rgb(getComputedStyle(el).color));
  const bg = lum(rgb(getComputedStyle(back || document.body).backgroundColor));
  return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
}"""

CODE = '```python\ndef f(x):\n    # a comment\n    return "text" + str(x)\n```'


def with_drawer(page: Any) -> None:
    """On a phone, the sidebar (its footer with the Theme picker) in the picture."""
    button = page.locator("[data-drawer-open]")
    if button.is_visible() and page.locator(".layout").get_attribute("data-drawer") != "open":
        button.click()
        page.wait_for_function("() => document.getAnimations().length === 0")


def background(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


def test_system_follows_prefers_color_scheme(alice: Any) -> None:
    picker = alice.get_by_label("Theme")
    expect(picker).to_have_value("auto")
    expect(alice.locator("html")).to_have_attribute("data-theme", "auto")
    alice.emulate_media(color_scheme="dark")
    assert background(alice) == DARK_BG
    alice.emulate_media(color_scheme="light")
    assert background(alice) == LIGHT_BG


def test_dark_is_kept_across_reloads_and_applied_before_the_first_paint(
    alice: Any, server_url: str
) -> None:
    alice.emulate_media(color_scheme="light")
    alice.context.add_init_script(AT_FIRST_PAINT)
    alice.get_by_label("Theme").select_option("dark")
    expect(alice.locator("html")).to_have_attribute("data-theme", "dark")
    assert background(alice) == DARK_BG
    alice.reload()
    expect(alice.get_by_label("Theme")).to_have_value("dark")
    assert alice.evaluate("window.themeAtBody") == "dark"
    assert background(alice) == DARK_BG
    # The sign-in page and the admin follow it (the admin keeps its theme under the same key).
    other = alice.context.new_page()
    other.goto(f"{server_url}/admin/")
    expect(other.locator("html")).to_have_attribute("data-theme", "dark")
    other.context.clear_cookies()
    other.goto(f"{server_url}/accounts/login/")
    assert other.evaluate("window.themeAtBody") == "dark"
    assert background(other) == DARK_BG


def test_light_wins_over_a_dark_system_and_system_goes_back_to_it(alice: Any) -> None:
    alice.emulate_media(color_scheme="dark")
    picker = alice.get_by_label("Theme")
    picker.select_option("light")
    assert background(alice) == LIGHT_BG
    alice.reload()
    assert background(alice) == LIGHT_BG
    alice.get_by_label("Theme").select_option("auto")
    assert background(alice) == DARK_BG
    assert alice.evaluate("localStorage.getItem('theme')") == "auto"


def test_the_dark_theme_is_readable(alice: Any) -> None:
    alice.get_by_label("Theme").select_option("dark")
    answer = finished(alice, f"Some `inline` text.\n\n{CODE}", "emulator/echo")
    checked = {
        "an answer's text": answer.locator(".content p").first,
        "its footer": answer.locator(".message-footer .meta"),
        "a question": alice.locator("article.user .content").first,
        "the sidebar's entries": alice.locator(".conversation-list li a").first,
        "the sidebar's footer": alice.locator(".sidebar-prefs label"),
        "a keyword": answer.locator(".code-block .k").first,
        "a comment": answer.locator(".code-block .c1").first,
        "a string": answer.locator(".code-block .s2").first,
        "inline code": answer.locator(".content p code"),
    }
    for name, element in checked.items():
        ratio = element.evaluate(CONTRAST)
        assert ratio >= 4.5, f"{name}: {ratio:.2f}:1 in the dark theme"
    screenshots(alice, "theme-dark")
    screenshots(alice, "theme-dark-sidebar", with_drawer)
    alice.get_by_label("Theme").select_option("light")
    assert background(alice) == LIGHT_BG
    screenshots(alice, "theme-light")
    screenshots(alice, "theme-light-sidebar", with_drawer)


# --- The admin link --------------------------------------------------------------------------

NOT_STAFF = "dora"


@pytest.fixture(scope="module")
def not_staff(server_env: dict[str, str]) -> str:
    code = (
        "from django.contrib.auth import get_user_model\n"
        f"get_user_model().objects.create_user({NOT_STAFF!r}, password={PASSWORD!r})\n"
    )
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", code]
    subprocess.run(command, env=server_env, cwd=ROOT, check=True, capture_output=True)
    return NOT_STAFF


def test_staff_have_a_link_to_the_admin(alice: Any, server_url: str) -> None:
    link = alice.locator("#sidebar").get_by_role("link", name="Admin")
    expect(link).to_have_attribute("href", "/admin/")
    link.click()
    expect(alice).to_have_url(f"{server_url}/admin/")
    expect(alice.get_by_role("heading", name="Site administration")).to_be_visible()


def test_others_have_none(browser: Any, server_url: str, not_staff: str) -> None:
    page = sign_in(browser, server_url, not_staff)
    try:
        expect(page.locator("#sidebar").get_by_role("link", name="Chat defaults")).to_be_visible()
        expect(page.locator("#sidebar").get_by_role("link", name="Admin")).to_have_count(0)
    finally:
        page.context.close()


def test_a_shared_page_follows_the_theme(alice: Any, browser: Any, server_url: str) -> None:
    finished(alice, "Shared in the dark", "emulator/echo")
    alice.locator("details.conversation-actions > summary").click()
    alice.get_by_role("button", name="Create a share link").click()
    url = alice.get_by_label("The new link").input_value()
    # A reader of its own, signed out, who chose Dark here before.
    reader = browser.new_context(color_scheme="light").new_page()
    try:
        reader.goto(f"{server_url}/accounts/login/")
        reader.evaluate("localStorage.setItem('theme', 'dark')")
        reader.context.add_init_script(AT_FIRST_PAINT)
        reader.goto(url)
        expect(reader.locator("article.message")).to_have_count(2)
        assert reader.evaluate("window.themeAtBody") == "dark"
        assert background(reader) == DARK_BG
    finally:
        reader.context.close()
