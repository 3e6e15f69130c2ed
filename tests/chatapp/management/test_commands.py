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


def test_prepare_collects_the_static_files_only_when_they_changed(
    settings: Any, tmp_path: Any
) -> None:
    """A second `make run` with nothing to do does none of it (the collect took 10 s or more)."""
    settings.STATIC_ROOT = tmp_path / "static"
    collected = settings.STATIC_ROOT / "chatapp" / "chat.css"
    run("prepare")
    assert get_user_model().objects.filter(is_superuser=True).exists()
    assert collected.exists()

    collected.unlink()  # a collect would put it back
    run("prepare")
    assert not collected.exists()  # nothing changed: not collected again

    (settings.STATIC_ROOT / ".collected").write_text("the files as they were before an edit")
    run("prepare")
    assert collected.exists()
