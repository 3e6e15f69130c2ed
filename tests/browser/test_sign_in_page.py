"""The sign-in page in real Chromium: it loads its stylesheet and icon, no htmx and no chat
script (only theme.js, the few lines that put the chosen theme on it before it is drawn), trips
no CSP rule, shows a wrong password in words and signs in; and pages arrive
compressed when the browser accepts it.

With `CHAT_SCREENSHOTS` set to a directory, the sign-in page (with its error) is saved there at
1280x800 and 390x844.
"""

from __future__ import annotations

import gzip
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD, screenshots

pytestmark = [pytest.mark.browser]

# Every CSP violation, from before the page's first script could run.
RECORD_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
    window.cspViolations.push(`${event.effectiveDirective} ${event.blockedURI}`);
});
"""
HASHED = r"\.[0-9a-f]{12}\."


def fetched_paths(page: Any, action: Any) -> list[str]:
    """The path of every request the page made while `action` ran and its load settled."""
    paths: list[str] = []

    def record(request: Any) -> None:
        paths.append(urlsplit(request.url).path)

    page.on("request", record)
    action()
    page.wait_for_load_state("networkidle")
    page.remove_listener("request", record)
    return paths


def test_the_sign_in_page_loads_no_script_and_signs_in(browser: Any, server_url: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.add_init_script(RECORD_CSP)
    try:
        paths = fetched_paths(page, lambda: page.goto(f"{server_url}/accounts/login/"))
        assert paths[0] == "/accounts/login/"
        assert [re.sub(HASHED, ".", path) for path in sorted(paths[1:])] == [
            "/static/chatapp/chat.css",
            "/static/chatapp/icon.svg",
            "/static/chatapp/theme.js",
        ], paths
        assert all(re.search(HASHED, path) for path in paths[1:])
        assert page.evaluate("typeof window.htmx") == "undefined"
        # Styled by the one stylesheet: the form is a card, not the browser's default.
        assert (
            page.locator("form.card").evaluate("el => getComputedStyle(el).borderRadius") != "0px"
        )

        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill("not-the-password")
        paths = fetched_paths(page, lambda: page.get_by_role("button", name="Sign in").click())
        expect(page.get_by_role("alert")).to_have_text(re.compile("didn't match"))
        scripts = [path for path in paths if path.endswith(".js")]
        assert not [path for path in scripts if "/theme." not in path], paths
        screenshots(page, "sign-in")

        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(f"{server_url}/")
        expect(page.get_by_label("Message")).to_be_visible()
        # The chat page has its scripts: htmx, and the chat's modules under hashed names.
        page.wait_for_function("() => typeof window.htmx === 'object'")
        assert page.evaluate("window.cspViolations") == []
    finally:
        context.close()


def test_a_page_is_gzipped_when_the_client_accepts_it(server_url: str) -> None:
    url = f"{server_url}/accounts/login/"
    with httpx.Client(timeout=10) as http:
        compressed = http.get(url, headers={"Accept-Encoding": "gzip, deflate, br"})
        plain = http.get(url, headers={"Accept-Encoding": "identity"})
    assert compressed.headers["content-encoding"] == "gzip"
    assert "Accept-Encoding" in compressed.headers["vary"]
    assert "Accept-Encoding" in plain.headers["vary"]
    assert "content-encoding" not in plain.headers
    assert int(compressed.headers["content-length"]) < len(plain.content)
    assert "<h1>Gateway Chat</h1>" in compressed.text
    # The form's CSRF token is masked anew for each response; the rest of the page is the same.
    token = r'name="csrfmiddlewaretoken" value="[^"]+"'
    assert re.sub(token, "", compressed.text) == re.sub(token, "", plain.text)


def test_the_raw_bytes_of_a_gzipped_page_are_gzip(server_url: str) -> None:
    """httpx decodes what it is sent: the bytes on the wire are read before it does."""
    with (
        httpx.Client(timeout=10) as http,
        http.stream(
            "GET", f"{server_url}/accounts/login/", headers={"Accept-Encoding": "gzip"}
        ) as response,
    ):
        raw = b"".join(response.iter_raw())
    assert gzip.decompress(raw).startswith(b"<!doctype html>")
