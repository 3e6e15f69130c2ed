"""A page whose session ends (signed out in another tab) goes to the sign-in page and back.

The server closes the session's sockets with 4401 (`chatapp/ws/session_sockets.py`); a page that
only reconnected would be refused every few seconds for ever, showing a conversation it can no
longer update.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD, send

pytestmark = [pytest.mark.browser]


def test_signing_out_in_another_tab_sends_this_one_to_sign_in_and_back(
    browser: Any, server_url: str
) -> None:
    # A session of its own (the form, not the suite's cached sign-in), so ending it leaves the
    # other tests' sessions alone.
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{server_url}/accounts/login/")
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server_url}/")
        send(page, "Hello", "emulator/chat")
        page.wait_for_url(re.compile(r"/c/\d+/$"))
        expect(page.locator("body")).to_have_attribute("data-socket", "open")
        conversation = page.url.removeprefix(server_url)

        other = context.new_page()
        other.goto(f"{server_url}/")
        other.get_by_role("button", name="Sign out").click()
        other.wait_for_url(re.compile(r"/accounts/login/"))

        page.wait_for_url(re.compile(r"/accounts/login/\?next="))
        assert page.url.endswith(f"?next={conversation.replace('/', '%2F')}")
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server_url}{conversation}")
    finally:
        context.close()
