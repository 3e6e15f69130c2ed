"""Settings for the chat app, read from the environment.

Embedded defaults make `make run` work on a fresh machine with nothing else running: SQLite, the
in-memory channel layer and the built-in gateway emulator. Setting `DATABASE_URL`, `REDIS_URL` or
`LLM_BASE_URL` swaps in PostgreSQL, the Redis channel layer or a real gateway; `DJANGO_HTTPS=1`
is the production mode behind a TLS-terminating proxy (docs/deployment.md, "Running in production").
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def database_from_url(url: str) -> dj_database_url.DBConfig:
    """One `DATABASES` entry from a URL, parsed by dj-database-url (`sqlite:////abs/path.db`,
    `postgres://user:pw@host:port/name?sslmode=require`; query options land in `OPTIONS`).

    PostgreSQL connections come from psycopg's pool, as Django documents for ASGI instead of
    persistent connections: a connection belongs to the thread that opened it, and under ASGI the
    threads that run queries are not tied to requests, so persistent ones are neither reliably
    reused nor closed. The pool lends one per use and takes it back when Django closes it (hence
    CONN_MAX_AGE = 0), and checks it before lending it, so a PostgreSQL restart costs no request.
    """
    config = dj_database_url.parse(url, conn_max_age=0)
    if config.get("ENGINE") == "django.db.backends.postgresql":
        from psycopg_pool import ConnectionPool

        options = config.setdefault("OPTIONS", {})
        options.setdefault(
            "pool",
            {
                "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "2")),
                "max_size": int(os.environ.get("DATABASE_POOL_MAX_SIZE", "10")),
                "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "10")),
                "check": ConnectionPool.check_connection,
            },
        )
    return config


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
    "django_tasks_db",
    "chatapp",
]

# Django's own middleware, with the hooks that do no I/O run on the event loop instead of in a
# thread each (see chatapp.patches.inline_middleware); same classes, same order, same behaviour.
MIDDLEWARE = [
    "chatapp.patches.inline_middleware.GZip",  # first: it compresses what the others made
    "chatapp.middleware.NoStore",  # ours: Cache-Control: no-store on every view's response
    "chatapp.patches.inline_middleware.Security",
    "chatapp.patches.inline_middleware.ContentSecurityPolicy",
    "chatapp.patches.inline_middleware.Session",
    "chatapp.patches.inline_middleware.Common",
    "chatapp.patches.inline_middleware.Csrf",
    "chatapp.patches.inline_middleware.Authentication",
    "chatapp.middleware.RequestMemo",  # ours: what a request reads once (chatapp.request_memo)
    "chatapp.patches.inline_middleware.Messages",
    "chatapp.patches.inline_middleware.XFrameOptions",
    "django_htmx.middleware.HtmxMiddleware",
]

# Django's W001-W003 look for its middleware by path, not for these subclasses of it;
# chatapp.checks asks the same questions of our classes.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]

# Model output is untrusted: even if some markup slipped past the sanitizer, the browser runs only
# our own scripts, talks only to this origin and loads no remote media.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],  # a remote image is shown as a link (rendering/markdown.py)
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
                "chatapp.identity.password.context",
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
if DATABASES["default"].get("ENGINE", "").endswith("sqlite3"):
    # Django's backend on sqlean's SQLite, with sqlite-vec loaded: knowledge collections' store.
    DATABASES["default"]["ENGINE"] = "chatapp.patches.sqlite_backend"
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
    # At-most-once by design: a message waiting longer than `expiry` seconds is dropped, and so is
    # one sent to a channel already holding `capacity` messages (a consumer that stopped reading).
    # The app never depends on a delta arriving: deltas are numbered, and a browser that sees a
    # gap asks the worker for a snapshot (chatapp/messaging/socket_messages.py). `group_expiry` is
    # how long a socket's group membership lasts without being renewed.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 gives up reading after 5 s by default, as long as the layer's
                # blocking pops wait: an idle socket or worker would fail. Longer, a dead server
                # still shows.
                # redis-py's pool refuses (MaxConnectionsError, "Too many connections") past 100
                # connections in use at once, and a process with 200 sockets and their answers'
                # group sends needs several hundred at a burst's peak: each refusal closed a
                # socket or lost a delta. They are opened only as needed and reused.
                "hosts": [
                    {
                        "address": os.environ["REDIS_URL"],
                        "socket_timeout": 15,
                        "max_connections": int(os.environ.get("CHAT_REDIS_CONNECTIONS", "1000")),
                    }
                ],
                "capacity": int(os.environ.get("CHAT_CHANNEL_CAPACITY", "200")),
                "expiry": int(os.environ.get("CHAT_CHANNEL_EXPIRY", "60")),
                "group_expiry": int(os.environ.get("CHAT_GROUP_EXPIRY", "86400")),
            },
        }
    }
else:
    # Channels' in-memory layer with cheaper expiry and group sends (see
    # chatapp.patches.channel_layer).
    CHANNEL_LAYERS = {"default": {"BACKEND": "chatapp.patches.channel_layer.LocalChannelLayer"}}

# --- Auth -----------------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "login"

# Local accounts (chatapp/identity). Off: the sign-in page shows no password form and no password
# is accepted anywhere, the admin's sign-in included (sign in with the provider instead).
CHAT_PASSWORD_SIGN_IN = env_bool("CHAT_PASSWORD_SIGN_IN", default=True)
# Self sign-up (/accounts/sign-up/); with approval on, a new account waits, inactive, until an
# admin approves it (Admin → Accounts waiting for approval).
CHAT_SIGN_UP = env_bool("CHAT_SIGN_UP", default=False)
CHAT_SIGN_UP_APPROVAL = env_bool("CHAT_SIGN_UP_APPROVAL", default=True)

# Single sign-on with an OpenID Connect provider (mozilla-django-oidc; docs/configuration.md
# says how to point it at Keycloak, Authentik, Entra ID, Google Workspace and Okta). On when the
# issuer and the client ID are set; the endpoints come from the issuer's discovery document
# (chatapp/identity/discovery.py), fetched on the first sign-in.
# The issuer exactly as the provider writes it in its tokens (Authentik's ends in a slash).
CHAT_OIDC_ISSUER = os.environ.get("CHAT_OIDC_ISSUER", "").strip()
CHAT_OIDC_CLIENT_ID = os.environ.get("CHAT_OIDC_CLIENT_ID", "")
CHAT_OIDC = bool(CHAT_OIDC_ISSUER and CHAT_OIDC_CLIENT_ID)
CHAT_OIDC_LABEL = os.environ.get("CHAT_OIDC_LABEL", "") or "single sign-on"
# The claim (in the ID token or from the userinfo endpoint) that lists the user's groups; empty:
# groups are not taken from the provider.
CHAT_OIDC_GROUPS_CLAIM = os.environ.get("CHAT_OIDC_GROUPS_CLAIM", "groups")
# A first sign-in whose verified e-mail matches an existing account without a provider link
# takes that account over when on; off (the default), it is refused (chatapp/identity/linking.py).
CHAT_OIDC_LINK_BY_EMAIL = env_bool("CHAT_OIDC_LINK_BY_EMAIL")
# mozilla-django-oidc's own settings, derived from the above.
OIDC_RP_CLIENT_ID = CHAT_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = os.environ.get("CHAT_OIDC_CLIENT_SECRET", "")
OIDC_RP_SCOPES = os.environ.get("CHAT_OIDC_SCOPES", "") or "openid email profile"
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_TIMEOUT = 10  # seconds, each request to the provider
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"

AUTHENTICATION_BACKENDS = [
    *(["django.contrib.auth.backends.ModelBackend"] if CHAT_PASSWORD_SIGN_IN else []),
    *(["chatapp.identity.provider_backend.ProviderBackend"] if CHAT_OIDC else []),
]
if not AUTHENTICATION_BACKENDS:  # no way to sign in: chatapp.checks reports it as an error
    AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]

# --- Static files ---------------------------------------------------------------------------------

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where collectstatic puts them, for the proxy to serve (nginx in deploy/).
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
# Hashed names (cached for a year) with a .br and .gz of each, served by chatapp.static_files.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "chatapp.static_files.StaticStorage"},
}

# --- I18N -----------------------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Gateway --------------------------------------------------------------------------------------

# Unset: the built-in emulator, started in-process on first use (see chatapp.gateways.configs).
LLM_BASE_URL = os.environ.get("LLM_BASE_URL", "").rstrip("/") or None
LLM_API_KEY = os.environ.get("LLM_API_KEY", "")
LLM_DEFAULT_MODEL = os.environ.get("LLM_DEFAULT_MODEL", "")
# A name of gateway_client.dialects.DIALECTS (numes, osmexo, tiny, nodul, litellm, ...); unset:
# guessed from the URL, then from the response headers.
LLM_DIALECT = os.environ.get("LLM_DIALECT") or None
# What the default gateway's usage.cost counts in (usd, sat, pnp, credits); unset: the dialect's.
LLM_COST_UNIT = os.environ.get("LLM_COST_UNIT", "")
# The model Read aloud asks the default gateway for (POST /audio/speech, Numes only); unset: the
# gateway row's own setting (Admin → Gateways), which this then overrides.
LLM_SPEECH_MODEL = os.environ.get("LLM_SPEECH_MODEL", "")
# The model voice input asks the default gateway for (POST /audio/transcriptions); unset: the
# gateway row's own setting (Admin → Gateways → Voice input), which this then overrides.
LLM_TRANSCRIPTION_MODEL = os.environ.get("LLM_TRANSCRIPTION_MODEL", "")
# The model that writes new conversations' titles on the default gateway; unset: the gateway
# row's own setting (Admin → Gateways → Titles), which this then overrides.
LLM_TITLE_MODEL = os.environ.get("LLM_TITLE_MODEL", "")
# The model knowledge collections are embedded with on the default gateway (POST /embeddings);
# unset: the gateway row's own setting (Admin → Gateways → Knowledge), which this then overrides.
LLM_EMBEDDING_MODEL = os.environ.get("LLM_EMBEDDING_MODEL", "")
# Seconds; each unset one keeps the dialect's default (gateway_client.dialects).
LLM_TIMEOUTS = {
    phase: float(os.environ[f"LLM_{phase.upper()}_TIMEOUT"])
    for phase in ("connect", "first_token", "idle", "total")
    if os.environ.get(f"LLM_{phase.upper()}_TIMEOUT")
}
# The environment variables a gateway's "API key environment variable" may name (comma-separated;
# a trailing * is a prefix). Only variables put there for gateways: a staff user who may edit
# gateways can send any of them to a server of their own (see chatapp.gateways.key_vault).
CHAT_KEY_ENV_ALLOWED = tuple(
    name.strip()
    for name in os.environ.get("CHAT_KEY_ENV_ALLOWED", "GATEWAY_KEY_*").split(",")
    if name.strip()
)
# Tests and demos only: the built-in emulator takes options from the model name
# ("emulator/long?long_tokens=500") and the app accepts such a suffix on a listed model.
CHAT_EMULATOR_REQUEST_OPTIONS = env_bool("CHAT_EMULATOR_REQUEST_OPTIONS")

# --- Background tasks -----------------------------------------------------------------------------

# Django's Tasks framework on its database backend (django-tasks-db): tasks are rows of the app's
# own database, run by `manage.py run_worker` (`make run` starts it beside Daphne).
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
# A knowledge file busy this many seconds without progress was left by a worker that stopped:
# the next worker's sweep picks it up again (`knowledge/tasks.py`).
CHAT_KNOWLEDGE_STALE_AFTER = float(os.environ.get("CHAT_KNOWLEDGE_STALE_AFTER", "120"))
CHAT_KNOWLEDGE_SWEEP_INTERVAL = 30.0

# --- Knowledge ------------------------------------------------------------------------------------
# A Chroma server (`chroma run`, `make chroma`) to keep knowledge collections' vectors in, with
# PostgreSQL's text search for their words (`make cluster` sets it); unset: sqlite-vec and FTS5 in
# the app's SQLite database.
CHAT_CHROMA_URL = os.environ.get("CHAT_CHROMA_URL", "").strip()

# --- Streaming ------------------------------------------------------------------------------------

CHAT_DELTA_INTERVAL = 0.05  # seconds between coalesced deltas on the channel layer
CHAT_FLUSH_INTERVAL = 1.0  # seconds between partial-text writes (and heartbeats)
CHAT_STALE_AFTER = 15.0  # a streaming generation with an older heartbeat is interrupted
CHAT_SWEEP_INTERVAL = 10.0
# Seconds between the allocator's trims as answers end (`streaming/memory_trim.py`); 0: never.
CHAT_MALLOC_TRIM_INTERVAL = float(os.environ.get("CHAT_MALLOC_TRIM_INTERVAL", "10"))
# A temporary chat is deleted this many seconds after the last page showing it closed (a reload
# comes back within it), and whatever its pages did, once it has been idle for a day.
CHAT_TEMPORARY_GRACE = float(os.environ.get("CHAT_TEMPORARY_GRACE", "20"))
CHAT_TEMPORARY_MAX_IDLE = 24 * 3600
# Seconds without a token before a streaming answer says "waiting for the gateway… N s".
CHAT_STALL_NOTICE = float(os.environ.get("CHAT_STALL_NOTICE", "6"))
# A turn runs at most this many rounds of tool calls (a model calling tools forever would spend
# without end); a tool that runs longer than CHAT_TOOL_TIMEOUT seconds is reported as failed.
CHAT_TOOL_ROUNDS = int(os.environ.get("CHAT_TOOL_ROUNDS", "8"))
CHAT_TOOL_TIMEOUT = float(os.environ.get("CHAT_TOOL_TIMEOUT", "20"))
# MCP servers' tools (`chatapp/tools/mcp`): a call's deadline, a connection's (and a listing's), the
# bytes one session may receive, and how often a server's tool list is asked for again (sooner
# when it has a problem).
CHAT_MCP_TIMEOUT = float(os.environ.get("CHAT_MCP_TIMEOUT", "60"))
CHAT_MCP_CONNECT_TIMEOUT = float(os.environ.get("CHAT_MCP_CONNECT_TIMEOUT", "10"))
CHAT_MCP_MAX_BYTES = int(os.environ.get("CHAT_MCP_MAX_BYTES", str(8 * 1024 * 1024)))
CHAT_MCP_REFRESH_INTERVAL = float(os.environ.get("CHAT_MCP_REFRESH_INTERVAL", "300"))
CHAT_MCP_RETRY_INTERVAL = float(os.environ.get("CHAT_MCP_RETRY_INTERVAL", "30"))
# Off: new conversations keep their first line as title, and no title is asked of a model.
CHAT_TITLES = env_bool("CHAT_TITLES", default=True)
# Voice input (`chatapp/transcription`): the longest recording, in seconds, and the largest, in
# bytes; the browser stops recording at the first and the server refuses past either. The bytes
# stay under what the server takes for any form (`access/body_limits.FORM`, 3 MB).
CHAT_VOICE_MAX_SECONDS = float(os.environ.get("CHAT_VOICE_MAX_SECONDS", "120"))
CHAT_VOICE_MAX_BYTES = int(os.environ.get("CHAT_VOICE_MAX_BYTES", str(2 * 1024 * 1024)))

# --- Rendering (chatapp/rendering/pool.py) --------------------------------------------------------

# Seconds a markdown render may take in a render process before it is killed (plain text shows).
CHAT_RENDER_DEADLINE = float(os.environ.get("CHAT_RENDER_DEADLINE", "5"))
CHAT_RENDER_WORKERS = int(os.environ.get("CHAT_RENDER_WORKERS", "2"))  # render processes
CHAT_RENDER_QUEUE = int(os.environ.get("CHAT_RENDER_QUEUE", "64"))  # renders that may wait
# Seconds a page waits for an answer with no stored render to be rendered (else: plain text).
CHAT_RENDER_PAGE_WAIT = float(os.environ.get("CHAT_RENDER_PAGE_WAIT", "0.1"))

# --- Logging --------------------------------------------------------------------------------------

# One handler, on the root logger, so each line is printed once: Daphne's `basicConfig` handler
# is replaced, the app's loggers propagate to it, and Django's own defaults (a console
# handler for DEBUG, which printed Django's lines a second time, and mail_admins) are dropped.
# Every line about a generation carries its IDs (chatapp.streaming.log_context); LOG_FORMAT=json
# writes one JSON object per line for log shippers (chatapp.log_format).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
if LOG_FORMAT not in {"plain", "json"}:
    raise ValueError(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "chatapp.streaming.log_context.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s"},
        "json": {"()": "chatapp.log_format.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "chatapp": {"level": os.environ.get("CHAT_LOG_LEVEL", "INFO")},
        "django": {"level": "INFO"},
        # The MCP SDK's lines per session (its session ID, stream reconnects) are noise; what
        # goes wrong with a server is said by chatapp.tools.mcp, once, with the server's name.
        "mcp": {"level": "WARNING"},
    },
}

# --- Production: HTTPS behind a proxy -------------------------------------------------------------

# On behind a TLS-terminating proxy (deploy/nginx/site.conf): `manage.py check --deploy` is clean.
# The proxy must set X-Forwarded-Proto itself, overwriting what a client sent, and Daphne must be
# reachable only through it; otherwise a client could claim https.
DJANGO_HTTPS = env_bool("DJANGO_HTTPS")
if DJANGO_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000"))
    # Preloading takes a submission to the browsers' list as well; the header alone commits to
    # nothing, and without it `check --deploy` warns.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", default=True)

# Cost ledger (issue 9). US dollars per unit for converted totals, e.g. "sat=0.00095,pnp=1.2"
# (micro-USD converts exactly without it); a Fernet key for gateway API keys at rest (default:
# derived from SECRET_KEY, see chatapp/gateways/key_vault.py).
CHAT_COST_RATES = os.environ.get("CHAT_COST_RATES", "")
# The first wait before asking a generation record again (it doubles, six asks in all): Numes
# writes the record shortly after the stream ends, and may say `in_progress` briefly.
CHAT_RECORD_FIRST_WAIT = 0.25
CHAT_KEY_ENCRYPTION_KEY = os.environ.get("CHAT_KEY_ENCRYPTION_KEY", "")

# --- Limits ---------------------------------------------------------------------------------------

# Counters that every server process must share (failed sign-ins) live in the cache: Redis when
# REDIS_URL is set, else this process's memory (one server: `make run`).
if os.environ.get("REDIS_URL"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["REDIS_URL"],
            "KEY_PREFIX": "chatapp",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Failed sign-ins per account and per client address within the window (seconds), after which
# that account or address is refused until the window ends (see chatapp.access.login_limits).
CHAT_LOGIN_FAILURES_PER_ACCOUNT = int(os.environ.get("CHAT_LOGIN_FAILURES_PER_ACCOUNT", "5"))
CHAT_LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("CHAT_LOGIN_FAILURES_PER_ADDRESS", "20"))
CHAT_LOGIN_WINDOW = 15 * 60
# How many proxies in front of the app write X-Forwarded-For (nginx: 1); the client's address is
# the entry the outermost of them wrote. 0: the peer's address, the header ignored.
CHAT_TRUSTED_PROXIES = int(os.environ.get("CHAT_TRUSTED_PROXIES", "0"))
# Answers a user may start per minute (send, retry, edit, continue; see chatapp.access.rate_limits).
CHAT_GENERATIONS_PER_MINUTE = int(os.environ.get("CHAT_GENERATIONS_PER_MINUTE", "30"))
# The page's websocket (see chatapp.ws.consumer): a message's size in characters, and how many
# messages a second it may send (a burst of up to CHAT_WS_BURST is let through).
CHAT_WS_MAX_MESSAGE = 64 * 1024
CHAT_WS_MESSAGES_PER_SECOND = 20.0
CHAT_WS_BURST = 40
