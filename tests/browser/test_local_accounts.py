"""Local accounts in real Chromium: a self sign-up that waits for an admin's approval, the admin
approving it, and a signed-in user changing their password from the user menu.

The server is a variant of the suite's with self sign-up on (approval on, as by default). With
`CHAT_SCREENSHOTS` set, the waiting page and the password change form are saved at both sizes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD, manage_shell, screenshots, serve

pytestmark = [pytest.mark.browser]

NEW_PASSWORD = "a brand new password"


@pytest.fixture(scope="module")
def open_server(server_env: dict[str, str]) -> Iterator[str]:
    with serve(server_env | {"CHAT_SIGN_UP": "1"}, "daphne-sign-up.log") as url:
        yield url


def sign_in_with(page: Any, server: str, username: str, password: str) -> None:
    page.goto(f"{server}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_a_sign_up_waits_for_approval_then_signs_in(browser: Any, open_server: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{open_server}/accounts/login/")
        page.get_by_role("link", name="Sign up").click()
        page.get_by_label("Username").fill("hopeful")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Password confirmation").fill(PASSWORD)
        page.get_by_role("button", name="Sign up").click()
        expect(page).to_have_url(f"{open_server}/accounts/waiting/")
        expect(page.get_by_role("status")).to_contain_text("waiting for an administrator")
        screenshots(page, "sign-up-waiting")

        sign_in_with(page, open_server, "hopeful", PASSWORD)
        expect(page.get_by_role("alert")).to_have_text(
            "Your account is waiting for an administrator's approval."
        )
        # An admin approves it (Admin → Accounts waiting for approval → Approve).
        admin = browser.new_context()
        try:
            admin_page = admin.new_page()
            sign_in_with(admin_page, open_server, "alice", PASSWORD)
            admin_page.goto(f"{open_server}/admin/chatapp/pendingapproval/")
            admin_page.get_by_role("row", name=re.compile("hopeful")).get_by_role(
                "checkbox"
            ).check()
            admin_page.locator('select[name="action"]').select_option("approve")
            admin_page.locator('button[name="index"]').click()
            expect(admin_page.locator(".messagelist")).to_contain_text("Approved 1 account")
        finally:
            admin.close()

        sign_in_with(page, open_server, "hopeful", PASSWORD)
        expect(page).to_have_url(f"{open_server}/")
        expect(page.locator(".logout")).to_contain_text("hopeful")
    finally:
        context.close()


def test_a_user_changes_their_password_from_the_menu(
    browser: Any, open_server: str, server_env: dict[str, str]
) -> None:
    manage_shell(
        server_env,
        "from django.contrib.auth.models import User\n"
        f"User.objects.create_user('changer', password={PASSWORD!r})\n",
    )
    context = browser.new_context()
    page = context.new_page()
    try:
        sign_in_with(page, open_server, "changer", PASSWORD)
        expect(page).to_have_url(f"{open_server}/")
        page.get_by_role("link", name="Password").click()
        expect(page.get_by_role("heading", level=2)).to_have_text("Change password")
        screenshots(page, "password-change")
        page.get_by_label("Old password").fill("not it")
        page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
        page.get_by_role("button", name="Change password").click()
        expect(page.get_by_role("alert")).to_contain_text("Your old password was entered")
        page.get_by_label("Old password").fill(PASSWORD)
        page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
        page.get_by_label("New password confirmation").fill(NEW_PASSWORD)
        page.get_by_role("button", name="Change password").click()
        expect(page.get_by_role("status")).to_contain_text("Your password was changed")
        # This session stays signed in; the new password signs in elsewhere, the old does not.
        page.get_by_role("link", name="Back to the chat").click()
        expect(page).to_have_url(f"{open_server}/")
        other = browser.new_context()
        try:
            fresh = other.new_page()
            sign_in_with(fresh, open_server, "changer", PASSWORD)
            expect(fresh.get_by_role("alert")).to_contain_text("didn't match")
            sign_in_with(fresh, open_server, "changer", NEW_PASSWORD)
            expect(fresh).to_have_url(f"{open_server}/")
        finally:
            other.close()
    finally:
        context.close()
