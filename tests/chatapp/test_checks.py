"""The deploy checks that stand in for Django's with our middleware subclasses: W001-W003, and
Django's own security checks run as if MIDDLEWARE held Django's classes (`manage.py check
--deploy` for real: without DJANGO_HTTPS it warns as stock Django does, with it it is clean)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from typing import Any

import pytest

from chatapp.checks import django_security_checks, required_middleware, stock_middleware
from tests.multiprocess.servers import ROOT


def test_our_middleware_passes() -> None:
    assert required_middleware() == []


@pytest.mark.parametrize(
    ("removed", "check_id"),
    [
        ("chatapp.patches.inline_middleware.Security", "chatapp.W001"),
        ("chatapp.patches.inline_middleware.XFrameOptions", "chatapp.W002"),
        ("chatapp.patches.inline_middleware.Csrf", "chatapp.W003"),
    ],
)
def test_a_missing_one_is_named(settings: Any, removed: str, check_id: str) -> None:
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != removed]
    assert [m.id for m in required_middleware()] == [check_id]


def deploy_check(https: bool, **more: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CHAT_", "LLM_"))}
    env |= more | {
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_HTTPS": "1" if https else "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check", "--deploy"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return result.stdout + result.stderr


def test_the_deploy_check_reports_djangos_https_warnings_without_https() -> None:
    output = deploy_check(https=False)
    for check_id in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert f"({check_id})" in output, output


def test_the_deploy_check_is_clean_in_the_production_mode() -> None:
    output = deploy_check(https=True)
    assert "System check identified no issues" in output, output


def test_djangos_checks_see_our_subclasses_as_djangos_classes(settings: Any) -> None:
    stock = stock_middleware()
    assert "django.middleware.security.SecurityMiddleware" in stock
    assert "django.contrib.sessions.middleware.SessionMiddleware" in stock
    assert "django.middleware.csrf.CsrfViewMiddleware" in stock
    assert "chatapp.middleware.NoStore" in stock  # ours alone: kept as it is
    settings.DEBUG = False
    settings.SECURE_HSTS_SECONDS = 0
    assert "security.W004" in [m.id for m in django_security_checks()]
    settings.SECURE_HSTS_SECONDS = 3600
    assert "security.W004" not in [m.id for m in django_security_checks()]


# What `make cluster` (deploy/cluster.py) gives every process besides the caller's environment:
# the checks connect to neither service, so addresses nothing listens on do.
CLUSTER = {
    "DATABASE_URL": "postgres://chat@127.0.0.1:9/chat",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "CHAT_TRUSTED_PROXIES": "1",
}


@pytest.mark.parametrize("where", ["one process", "cluster"])
def test_the_deploy_check_is_clean_with_single_sign_on_on(where: str) -> None:
    output = deploy_check(
        https=True,
        CHAT_OIDC_ISSUER="https://login.example.test/realms/staff",
        CHAT_OIDC_CLIENT_ID="gateway-chat",
        CHAT_OIDC_CLIENT_SECRET=secrets.token_urlsafe(20),
        CHAT_PASSWORD_SIGN_IN="0",
        **(CLUSTER if where == "cluster" else {}),
    )
    assert "System check identified no issues" in output, output


def test_the_checks_name_a_server_nobody_can_sign_in_to_and_a_plain_http_provider() -> None:
    off = deploy_check(https=True, CHAT_PASSWORD_SIGN_IN="0")
    assert "(chatapp.E101)" in off, off
    plain = deploy_check(
        https=True, CHAT_OIDC_ISSUER="http://login.example.test", CHAT_OIDC_CLIENT_ID="chat"
    )
    assert "(chatapp.W101)" in plain, plain
    assert "(chatapp.E102)" in plain, plain
