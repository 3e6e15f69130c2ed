"""Password checks are limited per account and per address, through the real forms.

The limits are the settings' defaults (5 failures per account, 20 per address, in 15 minutes);
every test starts with an empty cache (conftest). The cache is Redis when `REDIS_URL` is set,
which is what makes the counts hold across server processes. Every form that checks a password
shares the counters (the app's sign-in, the admin's, the admin's password change); every
spelling that signs in as an account counts as that account; the address is the one the
trusted proxies saw, whatever a client writes into `X-Forwarded-For`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import unicodedata
from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from chatapp.access import login_limits
from tests.multiprocess.servers import ROOT

pytestmark = [pytest.mark.django_db]

REFUSED = "Too many attempts, try again in 15 minutes."
MISMATCH = "Your username and password didn't match."


def attempt(
    username: str,
    password: str,
    address: str = "10.0.0.1",
    *,
    path: str = "/accounts/login/",
    forwarded_for: str | None = None,
) -> tuple[Client, str]:
    headers = {} if forwarded_for is None else {"HTTP_X_FORWARDED_FOR": forwarded_for}
    client = Client(REMOTE_ADDR=address, **headers)
    response = client.post(path, {"username": username, "password": password}, follow=False)
    if response.status_code == 302:
        return client, "signed in"
    return client, response.content.decode()


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_an_account_is_locked_after_its_failures_even_with_the_right_password(
    alice: Any, bob: Any, password: str
) -> None:
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT):
        _, page = attempt("alice", "wrong")
        assert MISMATCH in page
    client, page = attempt("alice", password)
    assert REFUSED in page
    assert MISMATCH not in page
    assert not signed_in(client)
    # Another address does not help: the limit is the account's.
    client, page = attempt("ALICE ", password, address="10.9.9.9")
    assert REFUSED in page
    # Another account from the same address is unaffected.
    client, page = attempt("bob", password)
    assert page == "signed in"
    assert signed_in(client)


def test_an_address_is_locked_after_its_failures_across_accounts(bob: Any, password: str) -> None:
    for index in range(settings.CHAT_LOGIN_FAILURES_PER_ADDRESS):
        _, page = attempt(f"guess{index}", "wrong")
        assert MISMATCH in page
    client, page = attempt("bob", password)
    assert REFUSED in page
    assert not signed_in(client)
    client, page = attempt("bob", password, address="10.0.0.2")
    assert page == "signed in"


def test_successful_sign_ins_are_unaffected_and_clear_the_accounts_count(
    alice: Any, password: str
) -> None:
    for _ in range(3):
        for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT - 1):
            assert MISMATCH in attempt("alice", "wrong")[1]
        client, page = attempt("alice", password)
        assert page == "signed in"
        assert signed_in(client)


def test_a_sign_in_that_checks_no_password_does_not_clear_the_count(
    alice: Any, password: str
) -> None:
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT - 1):
        attempt("alice", "wrong")
    attempt("alice", "")  # a field missing: no password is checked, nothing is reset
    assert MISMATCH in attempt("alice", "wrong")[1]
    assert REFUSED in attempt("alice", password)[1]


def test_the_wait_is_what_is_left_of_the_window(
    alice: Any, password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = time.time()
    monkeypatch.setattr(time, "time", lambda: start)
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT):
        attempt("alice", "wrong")
    monkeypatch.setattr(time, "time", lambda: start + 14 * 60 + 1)
    assert "Too many attempts, try again in 1 minute." in attempt("alice", password)[1]
    monkeypatch.setattr(time, "time", lambda: start + 15 * 60 + 1)
    assert attempt("alice", password)[1] == "signed in"


def test_the_counts_are_in_redis_when_redis_url_is_set() -> None:
    script = "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"
    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:1/0"}  # read, never connected to
    output = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        env={**env, "DJANGO_SETTINGS_MODULE": "chatapp.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert output.strip() == "django.core.cache.backends.redis.RedisCache"


def test_the_admins_sign_in_shares_the_limit(alice: Any, password: str) -> None:
    alice.is_staff = True
    alice.save()
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT):
        _, page = attempt("alice", "wrong", path="/admin/login/")
        assert "Please enter the correct username and password" in page
    client, page = attempt("alice", password, path="/admin/login/")
    assert REFUSED in page
    assert not signed_in(client)
    # One counter: the app's own sign-in is refused as well, and the other way round.
    assert REFUSED in attempt("alice", password)[1]
    cache.clear()
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT):
        attempt("alice", "wrong")
    assert REFUSED in attempt("alice", password, path="/admin/login/")[1]
    # The control: with no failures the right password signs in to the admin.
    cache.clear()
    assert attempt("alice", password, path="/admin/login/")[1] == "signed in"


def test_a_wrong_old_password_in_the_admins_password_change_counts(
    alice: Any, password: str
) -> None:
    alice.is_staff = True
    alice.save()
    client = Client(REMOTE_ADDR="10.0.0.1")
    client.force_login(alice)
    form = {"new_password1": "a new long password", "new_password2": "a new long password"}
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT):
        page = client.post("/admin/password_change/", {**form, "old_password": "wrong"})
        assert "Your old password was entered incorrectly" in page.content.decode()
    page = client.post("/admin/password_change/", {**form, "old_password": password})
    assert REFUSED in page.content.decode()
    alice.refresh_from_db()
    assert alice.check_password(password)  # unchanged
    assert REFUSED in attempt("alice", password)[1]  # and the account's sign-in waits too
    # The control: with no failures the right old password changes it.
    cache.clear()
    page = client.post("/admin/password_change/", {**form, "old_password": password})
    assert page.status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("a new long password")


FULLWIDTH_A, ORDINAL_A = "\uff41", "\u00aa"  # the review's: fullwidth a, feminine ordinal
FULLWIDTH_ALICE = "".join(chr(ord(c) - ord("a") + 0xFF41) for c in "alice")


# Every code point whose NFKC form is the letter: fullwidth, ordinal, mathematical, ...
def _spellings(letters: str) -> dict[str, list[str]]:
    found: dict[str, set[str]] = {letter: {letter} for letter in letters}
    for code in range(0x110000):
        normal = unicodedata.normalize("NFKC", chr(code))
        if normal in found:
            found[normal].add(chr(code))
    return {letter: sorted(chars) for letter, chars in found.items()}


SPELLINGS = _spellings("alice")


def test_the_spellings_include_the_reviews() -> None:
    assert {FULLWIDTH_A, ORDINAL_A} <= set(SPELLINGS["a"])


@pytest.mark.parametrize("spelling", [FULLWIDTH_ALICE, f"{ORDINAL_A}lice", f" {FULLWIDTH_A}lice "])
def test_the_reviews_spellings_sign_in_as_alice_and_share_its_count(
    alice: Any, password: str, spelling: str
) -> None:
    assert attempt(spelling, password)[1] == "signed in"  # the same account, to Django
    for _ in range(settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT):
        attempt(spelling, "wrong", address="10.0.0.7")
    assert REFUSED in attempt("alice", password)[1]


@given(st.lists(st.tuples(*(st.sampled_from(SPELLINGS[c]) for c in "alice")), min_size=5))
@examples(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_every_spelling_that_signs_in_as_alice_counts_as_alice(
    alice: Any, password: str, spellings: list[tuple[str, ...]]
) -> None:
    cache.clear()
    names = ["".join(letters) for letters in spellings]
    for name in names[: settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT]:
        assert MISMATCH in attempt(name, "wrong")[1]
    for name in ["alice", *names]:
        assert REFUSED in attempt(name, password, address="10.9.9.9")[1], name


def forged(index: int) -> str:
    return f"198.51.{index // 256}.{index % 256}"


def test_a_forged_forwarded_for_is_not_a_new_address_behind_one_proxy(
    settings: Any, bob: Any, password: str
) -> None:
    settings.CHAT_TRUSTED_PROXIES = 1
    # What nginx's old `$proxy_add_x_forwarded_for` passed on: the client's header, then its peer.
    for index in range(settings.CHAT_LOGIN_FAILURES_PER_ADDRESS):
        via_proxy = f"{forged(index)}, 203.0.113.7"
        _, page = attempt(f"guess{index}", "wrong", address="127.0.0.1", forwarded_for=via_proxy)
        assert MISMATCH in page
    via_proxy = f"{forged(999)}, 203.0.113.7"
    assert REFUSED in attempt("bob", password, address="127.0.0.1", forwarded_for=via_proxy)[1]
    assert REFUSED in attempt("bob", password, address="127.0.0.1", forwarded_for="203.0.113.7")[1]
    # Another client behind the same proxy is not locked out by it, forged header or not.
    other = f"{forged(7)}, 203.0.113.8"
    assert attempt("bob", password, address="127.0.0.1", forwarded_for=other)[1] == "signed in"


def test_two_proxies_read_the_second_entry_from_the_right(
    settings: Any, bob: Any, password: str
) -> None:
    settings.CHAT_TRUSTED_PROXIES = 2
    for index in range(settings.CHAT_LOGIN_FAILURES_PER_ADDRESS):
        chain = f"{forged(index)}, 203.0.113.7, 10.1.1.{index}"  # the inner proxy's peer varies
        attempt(f"guess{index}", "wrong", address="127.0.0.1", forwarded_for=chain)
    chain = "203.0.113.7, 10.1.1.1"
    assert REFUSED in attempt("bob", password, address="127.0.0.1", forwarded_for=chain)[1]
    chain = "203.0.113.9, 10.1.1.1"
    assert attempt("bob", password, address="127.0.0.1", forwarded_for=chain)[1] == "signed in"


def test_an_ipv6_host_rotating_through_its_64_is_one_address(bob: Any, password: str) -> None:
    for index in range(settings.CHAT_LOGIN_FAILURES_PER_ADDRESS):
        attempt(f"guess{index}", "wrong", address=f"2001:db8:1:2:{index:x}::{index + 1:x}")
    assert REFUSED in attempt("bob", password, address="2001:db8:1:2:ffff::1")[1]
    assert attempt("bob", password, address="2001:db8:1:3::1")[1] == "signed in"  # another /64


def test_an_ipv4_mapped_address_is_its_ipv4_address(bob: Any, password: str) -> None:
    for index in range(settings.CHAT_LOGIN_FAILURES_PER_ADDRESS):
        address = "10.0.0.1" if index % 2 else "::ffff:10.0.0.1"
        attempt(f"guess{index}", "wrong", address=address)
    assert REFUSED in attempt("bob", password, address="::ffff:10.0.0.1")[1]


def test_with_no_trusted_proxy_the_header_is_ignored(bob: Any, password: str) -> None:
    assert settings.CHAT_TRUSTED_PROXIES == 0  # the default: a server reached directly
    for index in range(settings.CHAT_LOGIN_FAILURES_PER_ADDRESS):
        attempt(f"guess{index}", "wrong", address="10.0.0.1", forwarded_for=forged(index))
    assert REFUSED in attempt("bob", password, address="10.0.0.1", forwarded_for="10.0.0.2")[1]


def _views(patterns: list[Any]) -> list[Any]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _views(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            found.append(pattern.callback)
    return found


def test_every_view_that_checks_a_password_uses_the_limited_forms() -> None:
    """A new sign-in or password-change route must count on the same counters."""
    checked = []
    for view in _views(get_resolver().url_patterns):
        view_class = getattr(view, "view_class", None)
        if view_class is None:
            continue
        if issubclass(view_class, LoginView):
            form = (
                view.view_initkwargs.get("authentication_form")
                or view_class.authentication_form
                or AuthenticationForm
            )
            assert issubclass(form, login_limits.LimitedAuthenticationForm), view
            checked.append(view)
        elif issubclass(view_class, PasswordChangeView):
            form = view.view_initkwargs.get("form_class") or view_class.form_class
            assert issubclass(
                form,
                (
                    login_limits.LimitedPasswordChangeForm,
                    login_limits.LimitedAdminPasswordChangeForm,
                ),
            ), view
            checked.append(view)
    assert len(checked) == 2  # the app's sign-in and its password change
    # The admin builds its views per request, from these two.
    assert issubclass(admin.site.login_form, login_limits.LimitedAuthenticationForm)
    assert issubclass(admin.site.password_change_form, login_limits.LimitedAdminPasswordChangeForm)
