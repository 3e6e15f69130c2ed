"""Management commands: first-run admin account and the heartbeat sweep."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = [pytest.mark.django_db]


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_ensure_admin_uses_the_environment(monkeypatch: Any) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "root")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "from-the-env-123")
    assert "Created admin account 'root'." in run("ensure_admin")
    user = get_user_model().objects.get(username="root")
    assert user.is_superuser
    assert user.check_password("from-the-env-123")
    assert "nothing to do" in run("ensure_admin")


def test_ensure_admin_generates_and_prints_a_password_once(monkeypatch: Any) -> None:
    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    output = run("ensure_admin")
    password = output.split("password: ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert password not in run("ensure_admin")
