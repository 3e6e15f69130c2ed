"""Settings read from the environment."""

from __future__ import annotations

import pytest

from chatapp.settings import database_from_url


def test_sqlite_urls() -> None:
    assert database_from_url("sqlite:////tmp/x.db")["NAME"] == "/tmp/x.db"
    assert database_from_url("sqlite:///x.db")["NAME"] == "x.db"


def test_postgres_url() -> None:
    db = database_from_url("postgres://me:p%40ss@db.local:5433/chat")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "me",
        "p@ss",
        "db.local",
        "5433",
        "chat",
    )


def test_unknown_scheme_is_an_error() -> None:
    with pytest.raises(ValueError, match="not supported"):
        database_from_url("mysql://x/y")
