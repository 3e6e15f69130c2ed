"""Settings read from the environment."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from psycopg_pool import ConnectionPool

from chatapp.settings import database_from_url

ROOT = Path(__file__).resolve().parents[2]


def settings_in_subprocess(env: dict[str, str], *names: str) -> dict[str, Any]:
    """Module-level settings as a process started with `env` reads them."""
    script = (
        "import orjson, sys\nimport chatapp.settings as s\n"
        f"sys.stdout.write(orjson.dumps({{n: getattr(s, n) for n in {names!r}}}, default=str)"
        ".decode())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    values: dict[str, Any] = orjson.loads(result.stdout)
    return values


def test_sqlite_urls() -> None:
    assert database_from_url("sqlite:////tmp/x.db")["NAME"] == "/tmp/x.db"
    assert database_from_url("sqlite:///x.db")["NAME"] == "x.db"
    assert "pool" not in database_from_url("sqlite:///x.db").get("OPTIONS", {})


def test_postgres_url_with_its_options_and_the_pool() -> None:
    db = database_from_url(
        "postgres://me:p%40ss@db.local:5433/chat?sslmode=verify-full&sslrootcert=/etc/ca.pem"
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "me",
        "p@ss",
        "db.local",
        5433,
        "chat",
    )
    assert db["OPTIONS"] == {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
        "pool": {
            "min_size": 2,
            "max_size": 10,
            "timeout": 10.0,
            "check": ConnectionPool.check_connection,
        },
    }
    # Django refuses a pool with persistent connections; the pool is what persists.
    assert db["CONN_MAX_AGE"] == 0


def test_unknown_scheme_is_an_error() -> None:
    with pytest.raises(ValueError, match="gopher"):
        database_from_url("gopher://x/y")


def test_the_redis_layer_has_explicit_capacity_and_expiry_from_the_environment() -> None:
    env = {
        "REDIS_URL": "redis://127.0.0.1:6390/0",
        "CHAT_CHANNEL_CAPACITY": "500",
        "CHAT_REDIS_CONNECTIONS": "700",
    }
    (layer,) = settings_in_subprocess(env, "CHANNEL_LAYERS")["CHANNEL_LAYERS"].values()
    config = layer["CONFIG"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert config["hosts"] == [
        {"address": "redis://127.0.0.1:6390/0", "socket_timeout": 15, "max_connections": 700}
    ]
    assert (config["capacity"], config["expiry"], config["group_expiry"]) == (500, 60, 86400)


def test_https_mode_passes_check_deploy_with_no_warning() -> None:
    env = {
        "DJANGO_HTTPS": "1",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "chat.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    values = settings_in_subprocess(
        env, "SECURE_PROXY_SSL_HEADER", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
        "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "CSRF_TRUSTED_ORIGINS",
    )  # fmt: skip
    assert values == {
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "CSRF_TRUSTED_ORIGINS": ["https://chat.example.com"],
    }


def test_without_https_mode_the_cookies_stay_usable_over_http() -> None:
    values = settings_in_subprocess({"DJANGO_HTTPS": ""}, "DJANGO_HTTPS")
    assert values == {"DJANGO_HTTPS": False}
    from django.conf import settings

    assert settings.SESSION_COOKIE_SECURE is False
