"""Settings for the chat app, read from the environment.

Embedded defaults make `make run` work on a fresh machine with nothing else running: SQLite, the
in-memory channel layer and the built-in gateway emulator. Setting `DATABASE_URL`, `REDIS_URL` or
`LLM_BASE_URL` swaps in PostgreSQL, the Redis channel layer or a real gateway.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Required, TypedDict
from urllib.parse import unquote, urlsplit

from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


class DatabaseSettings(TypedDict, total=False):
    """One `DATABASES` entry, as far as we set it."""

    ENGINE: Required[str]
    NAME: Required[str]
    USER: str
    PASSWORD: str
    HOST: str
    PORT: str
    CONN_MAX_AGE: int
    CONN_HEALTH_CHECKS: bool
    OPTIONS: dict[str, object]
    TEST: dict[str, str]


def database_from_url(url: str) -> DatabaseSettings:
    """`sqlite:///relative.db`, `sqlite:////abs/path.db` or `postgres://user:pw@host:port/name`."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path or ":memory:"}
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    raise ValueError(f"DATABASE_URL scheme {parts.scheme!r} is not supported (sqlite, postgres)")


def dev_secret_key() -> str:
    """A per-checkout key persisted to a git-ignored file, so sessions survive restarts."""
    path = BASE_DIR / "chatapp" / ".secret_key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key


# --- Core -----------------------------------------------------------------------------------------

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or dev_secret_key()
DEBUG = env_bool("DJANGO_DEBUG", default=False)


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "chatapp",
]

# Django's own middleware, with the hooks that do no I/O run on the event loop instead of in a
# thread each (see chatapp.middleware); same classes, same order, same behaviour.
MIDDLEWARE = [
    "chatapp.middleware.Security",
    "chatapp.middleware.ContentSecurityPolicy",
    "chatapp.middleware.Session",
    "chatapp.middleware.Common",
    "chatapp.middleware.Csrf",
    "chatapp.middleware.Authentication",
    "chatapp.middleware.Messages",
    "chatapp.middleware.XFrameOptions",
    "django_htmx.middleware.HtmxMiddleware",
]

# Model output is untrusted: even if some markup slipped past the sanitizer, the browser runs only
# our own scripts, talks only to this origin and loads no remote media.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", "https:"],
    "media-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

ROOT_URLCONF = "chatapp.urls"
ASGI_APPLICATION = "chatapp.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------

DATABASES = {
    "default": database_from_url(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Workers flush partial answers while pages read them: wait for the lock instead of failing.
    # WAL: pages read while the writer writes, and a commit is an append, not a journal rewrite
    # with fsyncs (the turn's insert was most of a send's time under load). NORMAL sync is WAL's
    # recommended level: a power cut may lose the last commits, never corrupt the file.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests on a file too: Django's in-memory test database is shared-cache, where a busy table
    # fails at once instead of waiting out the timeout, which the writer's thread would hit.
    # CHAT_TEST_DATABASE names another file, so that two test runs can share a checkout.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("CHAT_TEST_DATABASE") or str(BASE_DIR / ".test-db.sqlite3")
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels -------------------------------------------------------------------------------------

if os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 gives up reading after 5 s by default, as long as the layer's blocking
            # pops wait: an idle socket or worker would fail. Longer, a dead server still shows.
            "CONFIG": {"hosts": [{"address": os.environ["REDIS_URL"], "socket_timeout": 15}]},
        }
    }
else:
    # Channels' in-memory layer with cheaper expiry and group sends (see chatapp.channel_layer).
    CHANNEL_LAYERS = {"default": {"BACKEND": "chatapp.channel_layer.LocalChannelLayer"}}

# --- Auth -----------------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "login"

# --- Static files ---------------------------------------------------------------------------------

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

# --- I18N -----------------------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Gateway --------------------------------------------------------------------------------------

# Unset: the built-in emulator, started in-process on first use (see chatapp.gateway).
LLM_BASE_URL = os.environ.get("LLM_BASE_URL", "").rstrip("/") or None
LLM_API_KEY = os.environ.get("LLM_API_KEY", "")
LLM_DEFAULT_MODEL = os.environ.get("LLM_DEFAULT_MODEL", "")
# numes | osmexo | tiny | nodul; unset: guessed from the URL, then from the response headers.
LLM_DIALECT = os.environ.get("LLM_DIALECT") or None
# What the default gateway's usage.cost counts in (usd, sat, pnp, credits); unset: the dialect's.
LLM_COST_UNIT = os.environ.get("LLM_COST_UNIT", "")
# Seconds; each unset one keeps the dialect's default (gateway_client.dialects).
LLM_TIMEOUTS = {
    phase: float(os.environ[f"LLM_{phase.upper()}_TIMEOUT"])
    for phase in ("connect", "first_token", "idle", "total")
    if os.environ.get(f"LLM_{phase.upper()}_TIMEOUT")
}

# --- Streaming ------------------------------------------------------------------------------------

CHAT_DELTA_INTERVAL = 0.05  # seconds between coalesced deltas on the channel layer
CHAT_FLUSH_INTERVAL = 1.0  # seconds between partial-text writes (and heartbeats)
CHAT_STALE_AFTER = 15.0  # a streaming generation with an older heartbeat is interrupted
CHAT_SWEEP_INTERVAL = 10.0
# Seconds without a token before a streaming answer says "waiting for the gateway… N s".
CHAT_STALL_NOTICE = float(os.environ.get("CHAT_STALL_NOTICE", "6"))

# --- Logging --------------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "chatapp": {"handlers": ["console"], "level": os.environ.get("CHAT_LOG_LEVEL", "INFO")},
    },
}

# Cost ledger (issue 9). US dollars per unit for converted totals, e.g. "sat=0.00095,pnp=1.2"
# (micro-USD converts exactly without it); a Fernet key for gateway API keys at rest (default:
# derived from SECRET_KEY, see chatapp/key_vault.py).
CHAT_COST_RATES = os.environ.get("CHAT_COST_RATES", "")
# The first wait before asking a generation record again (it doubles, six asks in all): Numes
# writes the record shortly after the stream ends, and may say `in_progress` briefly.
CHAT_RECORD_FIRST_WAIT = 0.25
CHAT_KEY_ENCRYPTION_KEY = os.environ.get("CHAT_KEY_ENCRYPTION_KEY", "")
