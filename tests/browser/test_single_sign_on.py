"""Single sign-on through a real OpenID Connect provider (tests/oidc/provider.mjs: panva's
oidc-provider in Node), in real Chromium, against a Daphne server configured for it.

The user signs in on the provider's own page and lands in the chat; the account is made with the
name, e-mail and groups of the claims, and a later sign-in updates them, removing only the
groups the provider had given. A forged ID token (its payload changed under the provider's
signature), one for another audience, from another issuer, with another sign-in's nonce and an
expired one (each signed with the provider's real key) and a replayed callback are each refused
with a page that says so; no session results. A discovery document for another issuer is not
used. With password sign-in off the page offers the provider alone and the admin's form
redirects. A callback no sign-in of this browser started signs nobody out. An admin's
deactivation ends a provider user's page and running answer. With link by e-mail on, a
self-signed-up account carrying a colleague's address is never handed to them, and a preferred
username that breaks sign-up's rule (a right-to-left override) is not used.

With `CHAT_SCREENSHOTS` set, the sign-in page with both ways in and a refusal are saved at both
sizes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.oidc import provider as oidc
from tests.waiting import poll

from .conftest import (
    PASSWORD,
    finished,
    manage_shell,
    screenshots,
    send,
    serve,
    wait_for_text,
)

pytestmark = [pytest.mark.browser]

LABEL = "Test SSO"
# The provider's development sign-in page imports a web font; nothing may leave the machine.
OFFLINE = re.compile(r"^https://fonts\.(googleapis|gstatic)\.com/")


def sso_env(server_env: dict[str, str], issuer: str, **more: str) -> dict[str, str]:
    return server_env | {
        "CHAT_OIDC_ISSUER": issuer,
        "CHAT_OIDC_CLIENT_ID": oidc.CLIENT_ID,
        "CHAT_OIDC_CLIENT_SECRET": oidc.CLIENT_SECRET,
        "CHAT_OIDC_LABEL": LABEL,
        "CHAT_OIDC_SCOPES": "openid email profile groups",
        **more,
    }


@pytest.fixture(scope="module")
def sso(server_env: dict[str, str]) -> Iterator[tuple[str, oidc.Provider, dict[str, str]]]:
    """A server with single sign-on on, the provider it trusts, and the server's environment.
    The server starts first (it asks the provider only at a sign-in), so that the provider can
    be told the server's callback address."""
    oidc.skip_unless_installed()
    port = oidc.free_port()
    env = sso_env(server_env, f"http://127.0.0.1:{port}")
    log = Path(server_env["SERVER_DIR"]) / "oidc-provider.log"
    with (
        serve(env, "daphne-sso.log") as url,
        oidc.running(port, f"{url}/oidc/callback/", log) as provider,
    ):
        yield url, provider, env


def at_provider(browser: Any, server: str, login: str) -> Any:
    """A new browser on the sign-in page, through the provider's form as `login`: the page after
    the provider sends it back."""
    context = browser.new_context()
    context.route(OFFLINE, lambda route: route.abort())
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{server}/accounts/login/")
    page.get_by_role("link", name=f"Sign in with {LABEL}").click()
    page.locator('input[name="login"]').fill(login)
    page.locator('input[name="password"]').fill("any password")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()  # the provider's consent
    page.wait_for_url(re.compile(re.escape(server)))
    page.wait_for_load_state()
    return page


def account(env: dict[str, str], subject: str) -> dict[str, Any] | None:
    """The account linked to `subject`, as the database has it (None: no such link)."""
    code = (
        "import json\n"
        "from chatapp.identity.models import ProviderIdentity\n"
        f"link = ProviderIdentity.objects.filter(subject={subject!r}).first()\n"
        "user = link and link.user\n"
        "print(json.dumps(user and {'username': user.username, 'first_name': user.first_name,"
        " 'email': user.email, 'usable_password': user.has_usable_password(),"
        " 'groups': sorted(user.groups.values_list('name', flat=True))}))\n"
    )
    found: dict[str, Any] | None = json.loads(manage_shell(env, code))
    return found


def test_signing_in_makes_the_account_with_its_groups_and_opens_the_chat(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    server, provider, env = sso
    provider.set(
        mode=None,
        users={
            "sso-carol": {
                "name": "Carol Example",
                "email": "carol@corp.test",
                "groups": ["Research", "Operations"],
            }
        },
    )
    page = at_provider(browser, server, "sso-carol")
    try:
        expect(page).to_have_url(f"{server}/")
        expect(page.locator(".logout")).to_contain_text("sso-carol")
        expect(page.get_by_role("link", name="Password")).to_have_count(0)  # none to change
        assert account(env, "sso-carol") == {
            "username": "sso-carol",
            "first_name": "Carol Example",
            "email": "carol@corp.test",
            "usable_password": False,
            "groups": ["Operations", "Research"],
        }
    finally:
        page.context.close()


def test_a_later_sign_in_updates_the_account_and_only_the_providers_groups(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    server, provider, env = sso
    provider.set(mode=None, users={"sso-dan": {"name": "Dan", "groups": ["Research", "Ops"]}})
    at_provider(browser, server, "sso-dan").context.close()
    # An admin adds Dan to a group by hand; the provider then moves him from Ops to Sales.
    manage_shell(
        env,
        "from django.contrib.auth.models import Group, User\n"
        "group, _ = Group.objects.get_or_create(name='Managers')\n"
        "User.objects.get(username='sso-dan').groups.add(group)\n",
    )
    provider.set(
        users={
            "sso-dan": {
                "name": "Daniel Roe",
                "email": "dan@new.test",
                "groups": ["Research", "Sales"],
            }
        }
    )
    page = at_provider(browser, server, "sso-dan")
    try:
        expect(page).to_have_url(f"{server}/")
        assert account(env, "sso-dan") == {
            "username": "sso-dan",
            "first_name": "Daniel Roe",
            "email": "dan@new.test",
            "usable_password": False,
            "groups": ["Managers", "Research", "Sales"],
        }
    finally:
        page.context.close()


def test_a_preferred_username_with_a_right_to_left_override_is_not_used(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    """#45: the provider's preferred username was taken as given. One that fails sign-up's rule
    gives way to the e-mail."""
    server, provider, env = sso
    provider.set(
        mode=None,
        users={"sso-rtl": {"preferred_username": "\u202enimda", "email": "rtl@corp.test"}},
    )
    page = at_provider(browser, server, "sso-rtl")
    try:
        expect(page).to_have_url(f"{server}/")
        found = account(env, "sso-rtl")
        assert found is not None
        assert found["username"] == "rtl@corp.test"
    finally:
        page.context.close()


# What PyJWT (through our backend) says of each forged token, in the server's log: each is
# refused by the check it targets, not by another on the way.
REFUSED_BY = {
    "tampered": "The ID token was refused: Signature verification failed",
    "audience": "The ID token was refused: Audience doesn't match",
    "expired": "The ID token was refused: Signature has expired",
    "issuer": "The ID token was refused: Invalid issuer",
    "nonce": "JWT Nonce verification failed.",
}


@pytest.mark.parametrize("mode", REFUSED_BY)
def test_an_id_token_that_fails_verification_is_refused_with_a_page(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]], mode: str
) -> None:
    server, provider, env = sso
    login = f"sso-mallory-{mode}"
    provider.set(mode=mode, users={})
    try:
        page = at_provider(browser, server, login)
    finally:
        provider.set(mode=None)
    try:
        expect(page.get_by_role("heading", level=2)).to_have_text(f"Sign-in with {LABEL} failed")
        expect(page.get_by_role("alert")).to_have_text(
            "The provider's answer could not be verified, so you were not signed in."
        )
        assert "/oidc/callback/" in page.url
        if mode == "tampered":
            screenshots(page, "sign-in-refused")
        log = Path(env["SERVER_DIR"]) / "daphne-sso.log"
        poll(lambda: REFUSED_BY[mode] in log.read_text(), what=f"the log to say {REFUSED_BY[mode]}")
        page.goto(f"{server}/")
        expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
        assert account(env, login) is None
        assert account(env, f"{login}-admin") is None
    finally:
        page.context.close()


def test_a_replayed_callback_is_refused_with_a_page(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    server, provider, _ = sso
    provider.set(mode=None)
    context = browser.new_context()
    context.route(OFFLINE, lambda route: route.abort())
    callbacks: list[str] = []
    context.on("request", lambda r: callbacks.append(r.url) if "/oidc/callback/" in r.url else None)
    page = context.new_page()
    try:
        page.goto(f"{server}/accounts/login/")
        page.get_by_role("link", name=f"Sign in with {LABEL}").click()
        page.locator('input[name="login"]').fill("sso-erin")
        page.locator('input[name="password"]').fill("any password")
        page.get_by_role("button", name="Sign-in").click()
        page.get_by_role("button", name="Continue").click()
        expect(page).to_have_url(f"{server}/")
        assert len(callbacks) == 1
        response = page.goto(callbacks[0])  # the same code and state, a second time
        assert response is not None
        assert response.status == 400
        expect(page.get_by_role("alert")).to_contain_text("This sign-in was already used")
    finally:
        context.close()


def test_a_callback_from_another_site_leaves_the_user_signed_in_and_the_socket_open(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    """#45: a link to `/oidc/callback/?error=…` with no state used to sign the user out and close
    their sockets. A signed-in user follows it in another tab; the chat's socket still streams."""
    server, _, _ = sso
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{server}/accounts/login/")
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server}/")
        finished(page, "Hello", "emulator/chat")
        expect(page.locator("body")).to_have_attribute("data-socket", "open")
        conversation = page.url

        other = context.new_page()
        response = other.goto(f"{server}/oidc/callback/?error=access_denied")
        assert response is not None
        assert response.status == 400
        expect(other.get_by_role("alert")).to_contain_text("started in another browser")

        # The next answer streams over the same socket: a closed one would have sent the page
        # to the sign-in page instead.
        answer = send(page, "Still there?", "emulator/chat")
        wait_for_text(answer, 1)
        expect(answer).to_have_attribute("data-status", "completed")
        assert page.url == conversation
        expect(page.locator("body")).to_have_attribute("data-socket", "open")
        other.goto(f"{server}/")
        expect(other.locator(".logout")).to_contain_text("bob")
    finally:
        context.close()


@pytest.fixture(scope="module")
def provider_only(
    server_env: dict[str, str], sso: tuple[str, oidc.Provider, dict[str, str]]
) -> Iterator[str]:
    """A server with password sign-in off, trusting the same provider (not signed in there)."""
    _, provider, _ = sso
    env = sso_env(server_env, provider.issuer, CHAT_PASSWORD_SIGN_IN="0")
    with serve(env, "daphne-sso-only.log") as url:
        yield url


def test_with_passwords_off_the_page_offers_the_provider_alone(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]], provider_only: str
) -> None:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{provider_only}/accounts/login/")
        expect(page.get_by_role("link", name=f"Sign in with {LABEL}")).to_be_visible()
        expect(page.get_by_label("Password")).to_have_count(0)
        expect(page.get_by_text("or", exact=True)).to_have_count(0)
        # The admin's form sends people here (a posted password: tests/chatapp/test_accounts.py).
        page.goto(f"{provider_only}/admin/")
        expect(page).to_have_url(f"{provider_only}/accounts/login/?next=%2Fadmin%2F")
    finally:
        context.close()


def test_the_sign_in_page_shows_both_ways_in(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    server, _, _ = sso
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{server}/accounts/login/")
        expect(page.get_by_label("Password")).to_be_visible()
        link = page.get_by_role("link", name=f"Sign in with {LABEL}")
        expect(link).to_be_visible()
        assert link.get_attribute("href") == "/oidc/authenticate/"
        screenshots(page, "sign-in-single-sign-on")
    finally:
        context.close()


@pytest.mark.paced
def test_deactivating_a_provider_user_in_the_admin_ends_their_page_and_their_answer(
    browser: Any, sso: tuple[str, oidc.Provider, dict[str, str]], paced_emulator: Any
) -> None:
    """The admin unticks Active; the user's page goes to the sign-in page (its socket closed,
    4401) and their running answer is cancelled upstream."""
    server, provider, env = sso
    provider.set(mode=None, users={"sso-fay": {"name": "Fay"}})
    page = at_provider(browser, server, "sso-fay")
    admin = browser.new_context()
    try:
        expect(page).to_have_url(f"{server}/")
        answer = send(page, "A very long story", "emulator/long")  # 3,000 tokens at 40 a second
        expect(page).to_have_url(re.compile(r"/c/\d+/$"))
        wait_for_text(answer, 20)
        records = paced_emulator.app.records
        record = poll(
            lambda: records.latest(scenario="long", finished_at=None),
            what="the emulator to stream the answer",
        )
        admin_page = admin.new_page()
        admin_page.goto(f"{server}/accounts/login/")
        admin_page.get_by_label("Username").fill("alice")
        admin_page.get_by_label("Password").fill(PASSWORD)
        admin_page.get_by_role("button", name="Sign in").click()
        admin_page.goto(f"{server}/admin/auth/user/?q=sso-fay")
        admin_page.get_by_role("link", name="sso-fay", exact=True).click()
        admin_page.get_by_label("Active").uncheck()
        admin_page.get_by_role("button", name="Save", exact=True).click()
        expect(admin_page.locator(".messagelist")).to_contain_text("was changed successfully")

        page.wait_for_url(re.compile(r"/accounts/login/\?next="))
        finished = records.wait_finished(record.id)
        assert finished.final_outcome == "cancelled"
        status = manage_shell(
            env,
            "from chatapp.costs.models import Generation\n"
            "print(Generation.objects.filter(user__username='sso-fay').latest('pk').status)",
        )
        assert status.strip() == "cancelled"
    finally:
        admin.close()
        page.context.close()


@pytest.fixture(scope="module")
def linking_by_email(
    server_env: dict[str, str],
) -> Iterator[tuple[str, oidc.Provider, dict[str, str]]]:
    """A server with self sign-up and `CHAT_OIDC_LINK_BY_EMAIL` on, and a provider of its own
    (a provider allows one redirect URI)."""
    oidc.skip_unless_installed()
    port = oidc.free_port()
    env = sso_env(
        server_env, f"http://127.0.0.1:{port}", CHAT_SIGN_UP="1", CHAT_OIDC_LINK_BY_EMAIL="1"
    )
    log = Path(server_env["SERVER_DIR"]) / "oidc-provider-linking.log"
    with (
        serve(env, "daphne-sso-linking.log") as url,
        oidc.running(port, f"{url}/oidc/callback/", log) as provider,
    ):
        yield url, provider, env


def test_a_signed_up_account_with_a_colleagues_email_is_not_handed_to_the_colleague(
    browser: Any, linking_by_email: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    """#45's pre-hijacking: Mallory signs up with Vic's work address and an admin approves the
    account; Vic's first sign-in with the provider gets an account of its own. An account an
    admin made is linked by a verified address, and not by one the provider did not verify."""
    server, provider, env = linking_by_email
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server}/accounts/sign-up/")
        page.get_by_label("Username").fill("mallory-as-vic")
        page.get_by_label("Email").fill("vic@corp.test")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_label("Password confirmation").fill(PASSWORD)
        page.get_by_role("button", name="Sign up").click()
        expect(page).to_have_url(f"{server}/accounts/waiting/")
    finally:
        context.close()
    manage_shell(
        env,
        "from django.contrib.auth.models import User\n"
        "planted = User.objects.get(username='mallory-as-vic')\n"
        "planted.is_active = True\n"
        "planted.save()\n"  # approved
        "User.objects.create_user('wes-local', email='wes@corp.test', password='x' * 20)\n"
        "User.objects.create_user('uma-local', email='uma@corp.test', password='x' * 20)\n",
    )
    provider.set(
        mode=None,
        users={
            "sso-vic": {"email": "vic@corp.test"},
            "sso-wes": {"email": "wes@corp.test"},
            "sso-uma": {"email": "uma@corp.test", "email_verified": False},
        },
    )
    for login, username in [
        ("sso-vic", "sso-vic"),  # not the planted account
        ("sso-wes", "wes-local"),  # the admin's account, by its verified address
        ("sso-uma", "sso-uma"),  # the provider did not verify the address: no link
    ]:
        page = at_provider(browser, server, login)
        try:
            expect(page).to_have_url(f"{server}/")
            expect(page.locator(".logout")).to_contain_text(username)
            found = account(env, login)
            assert found is not None
            assert found["username"] == username
        finally:
            page.context.close()


def test_a_discovery_document_for_another_issuer_is_not_used(
    browser: Any, server_env: dict[str, str], sso: tuple[str, oidc.Provider, dict[str, str]]
) -> None:
    """Configured as `<issuer>/`, the document (which says `<issuer>`) describes another issuer:
    its keys must not verify anything, so no sign-in starts."""
    _, provider, _ = sso
    env = sso_env(server_env, f"{provider.issuer}/")
    with serve(env, "daphne-sso-mismatch.log") as server:
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(f"{server}/accounts/login/")
            with page.expect_response(re.compile(r"/oidc/authenticate/")) as started:
                page.get_by_role("link", name=f"Sign in with {LABEL}").click()
            assert started.value.status == 502
            expect(page.get_by_role("alert")).to_contain_text("Single sign-on is not available")
            log = Path(env["SERVER_DIR"]) / "daphne-sso-mismatch.log"
            poll(lambda: "describes the issuer" in log.read_text(), what="the log to say why")
        finally:
            context.close()
