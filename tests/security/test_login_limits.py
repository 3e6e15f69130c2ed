"""Sign-in attempts are limited per account and per address, through the real login form.

The limits are the settings' defaults (5 failures per account, 20 per address, in 15 minutes);
every test starts with an empty cache (conftest). The cache is Redis when `REDIS_URL` is set,
which is what makes the counts hold across server processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.multiprocess.servers import ROOT

pytestmark = [pytest.mark.django_db]

REFUSED = "Too many attempts, try again in 15 minutes."
MISMATCH = "Your username and password didn't match."


def attempt(username: str, password: str, address: str = "10.0.0.1") -> tuple[Client, str]:
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        "/accounts/login/", {"username": username, "password": password}, follow=False
    )
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
