"""The configured gateways: each enabled `Gateway` row resolved to what a request needs.

Gateways are `Gateway` rows (managed in the admin). `LLM_BASE_URL` / `LLM_API_KEY` create and
keep in step the "Default gateway" row; with no `LLM_BASE_URL` the default is the built-in
emulator, started in this process on first use, on its own thread and loopback port, so
`make run` needs no other process. A fresh install (no emulator row yet) gets a row for each of
the emulator's dialects at once, so that all four gateways show side by side offline. Streams go
over real loopback HTTP: an in-process ASGI transport would buffer whole bodies and defeat
streaming.

A row that cannot be resolved (its key unreadable, a base URL no request can go to: a whole URL
on an emulated row, whose URL is a path under the emulator) is left out of the usable ones and
kept with its reason (`unusable`), which the picker and the admin show; the others keep working,
and when it is the default, the first usable row stands in for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings

from chatapp.errors import ChatAppError
from chatapp.gateways import key_vault
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import default_unit
from gateway_client import emulator
from gateway_client.dialects import DIALECTS, DialectFacts, emulated_dialects, guess_dialect

logger = logging.getLogger(__name__)

EMULATOR_API_KEY = "emulator-key"
CONFIGS_TTL = 10.0
DEFAULT_NAME = "Default gateway"  # the row LLM_BASE_URL / LLM_API_KEY create and keep in step
EMULATOR_DIALECT = DIALECTS["numes"]  # the built-in emulator's row's: every feature


def emulator_name(dialect: DialectFacts) -> str:
    """The name of the emulator's gateway of `dialect`: each names its dialect, the default one
    too ("Emulator (Numes)"; it was "Emulator" alone, which said nothing beside the others)."""
    return f"Emulator ({dialect.title})"


EMULATOR_NAME = emulator_name(EMULATOR_DIALECT)  # the row standing for it when nothing is set
EMULATED_PATH = (
    "the base URL of an emulated gateway is a path under the emulator (such as /numes/api/v1), "
    "not a whole URL"
)
WHOLE_URL = "the base URL must be a whole http:// or https:// URL"

_emulator_lock = threading.Lock()
_emulator: tuple[AbstractContextManager[str], str] | None = None
# When it was read, the settings it was read under, the usable configs, the default's pk, the
# unusable ones, and the `SharedVersion` token it was read under.
_configs: (
    tuple[float, tuple[object, ...], dict[int, GatewayConfig], int, dict[int, GatewayConfig], str]
    | None
) = None
_refreshing: asyncio.Future[tuple[dict[int, GatewayConfig], int]] | None = None
# Reads the token any process's gateway save replaces (`SharedVersion.current`, passed in by
# apps.py: shared_cache stands above this layer); until then, nothing to compare.
_version: Callable[[], str] = str


def check_versions_with(version: Callable[[], str]) -> None:
    """Compare the cache with `version()` where `checked` asks for it (`configs`, `aconfigs`)."""
    global _version
    _version = version


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """What the worker needs of a `Gateway` row, resolved: its URL (the emulator's included) and
    its key, kept out of `repr` so that no log line can carry it."""

    pk: int
    name: str
    base_url: str
    api_key: str = field(repr=False)
    dialect: str | None
    cost_unit: str
    emulated: bool
    # Read aloud's model and voice on this gateway (`read_aloud.offer`); empty: none.
    speech_model: str = ""
    speech_voice: str = ""
    # Voice input's model on this gateway (`transcription.offer`); empty: it does not transcribe.
    transcription_model: str = ""
    # The model that writes new conversations' titles (`conversations.titles`); empty: theirs.
    title_model: str = ""
    # The model knowledge collections are embedded with (`knowledge.embedding`); empty: none.
    embedding_model: str = ""
    # Why the row cannot be used (`unusable`); empty for a usable one.
    unusable: str = ""


class GatewayUnusable(ChatAppError):
    """A row no request can go to, and why (in words, for the picker and the admin)."""


def base_url_problem(base_url: str, *, emulated: bool) -> str | None:
    """Why `base_url` cannot be a row's (None: it can): an emulated row's is a path under the
    emulator's root, any other's a whole http(s) URL."""
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        return EMULATED_PATH if emulated else WHOLE_URL
    if emulated:
        whole = parts.scheme or parts.netloc or not base_url.startswith("/")
        return EMULATED_PATH if whole else None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return WHOLE_URL
    return None


def emulator_root() -> str:
    """Start the emulator once per process (thread-safe) and return its root URL."""
    global _emulator
    with _emulator_lock:
        if _emulator is None:
            from gateway_client.emulator import serve_in_thread

            # A stalled demo stream gives up after 10 s, not the documented 10 minutes.
            manager = serve_in_thread(
                stall_limit_s=10.0, request_options=settings.CHAT_EMULATOR_REQUEST_OPTIONS
            )
            url = manager.__enter__()
            _emulator = (manager, url)
            logger.info("Started the built-in gateway emulator at %s", url)
        return _emulator[1]


def _settings_key() -> tuple[object, ...]:
    return (
        settings.LLM_BASE_URL,
        settings.LLM_API_KEY,
        settings.LLM_DIALECT,
        settings.LLM_COST_UNIT,
        settings.LLM_SPEECH_MODEL,
        settings.LLM_TRANSCRIPTION_MODEL,
        settings.LLM_TITLE_MODEL,
        settings.LLM_EMBEDDING_MODEL,
    )


def _ensure_default() -> Gateway:
    """The gateway the environment configures (`LLM_*`), created or brought in step with it; or,
    when it configures none, the emulator's row (created once, with the emulator's other
    dialects beside it; an admin may then edit or delete them)."""
    if not settings.LLM_BASE_URL:
        row, created = Gateway.objects.get_or_create(
            name=EMULATOR_NAME,
            defaults={**_emulated(EMULATOR_DIALECT), "emulated": True},
        )
        if created:
            _emulate_every_dialect(row)
        return row
    dialect = settings.LLM_DIALECT or guess_dialect(settings.LLM_BASE_URL) or ""
    found = Gateway.objects.filter(name=DEFAULT_NAME).first()
    detected = found.detected_dialect if found and found.base_url == settings.LLM_BASE_URL else ""
    wanted = {
        "base_url": settings.LLM_BASE_URL,
        "dialect": dialect,  # blank: asked of the gateway (`detected`)
        "cost_unit": settings.LLM_COST_UNIT or default_unit(dialect or detected),
        "emulated": False,
        "api_key_env": "",
    }
    if settings.LLM_SPEECH_MODEL:  # else an admin's choice on the row stands
        wanted["speech_model"] = settings.LLM_SPEECH_MODEL
    if settings.LLM_TRANSCRIPTION_MODEL:  # likewise
        wanted["transcription_model"] = settings.LLM_TRANSCRIPTION_MODEL
    if settings.LLM_TITLE_MODEL:  # likewise
        wanted["title_model"] = settings.LLM_TITLE_MODEL
    if settings.LLM_EMBEDDING_MODEL:  # likewise
        wanted["embedding_model"] = settings.LLM_EMBEDDING_MODEL
    gateway, _ = Gateway.objects.get_or_create(name=DEFAULT_NAME, defaults=wanted)
    changed = [name for name, value in wanted.items() if getattr(gateway, name) != value]
    for name in changed:
        setattr(gateway, name, wanted[name])
    key = settings.LLM_API_KEY
    if key and (not gateway.api_key_encrypted or _stored_key(gateway) != key):
        gateway.api_key_encrypted = key_vault.encrypt(key)
        changed.append("api_key_encrypted")
    elif not key and "base_url" in changed and gateway.api_key_encrypted:
        gateway.api_key_encrypted = ""  # the old URL's key: never sent to the new one unasked
        changed.append("api_key_encrypted")
    if "base_url" in changed and gateway.detected_dialect:
        gateway.detected_dialect = gateway.detection_note = ""  # the old URL's: ask the new one
        changed += ["detected_dialect", "detection_note"]
    if changed:
        gateway.save(update_fields=changed)
    return gateway


def _stored_key(gateway: Gateway) -> str | None:
    try:
        return key_vault.decrypt(gateway.api_key_encrypted)
    except key_vault.KeyUnavailable:
        return None


def resolve(gateway: Gateway) -> GatewayConfig:
    """A row → its config; `KeyUnavailable` when its key cannot be read, `GatewayUnusable` when
    no request could go to its base URL."""
    if problem := base_url_problem(gateway.base_url, emulated=gateway.emulated):
        raise GatewayUnusable(problem)
    if gateway.emulated:
        base_url = emulator_root() + gateway.base_url
        api_key = EMULATOR_API_KEY
    else:
        base_url = gateway.base_url.rstrip("/")
        api_key = key_vault.resolve(gateway.api_key_encrypted, gateway.api_key_env)
    return GatewayConfig(
        gateway.pk,
        gateway.name,
        base_url,
        api_key,
        gateway.dialect or gateway.detected_dialect or None,
        gateway.cost_unit,
        gateway.emulated,
        gateway.speech_model,
        gateway.speech_voice,
        transcription_model=gateway.transcription_model,
        title_model=gateway.title_model,
        embedding_model=gateway.embedding_model,
    )


def unusable_reason(gateway: Gateway) -> str | None:
    """Why the row cannot be used, in words (None: it can), as `resolve` finds it, without
    starting the emulator."""
    if problem := base_url_problem(gateway.base_url, emulated=gateway.emulated):
        return problem
    if not gateway.emulated:
        try:
            key_vault.resolve(gateway.api_key_encrypted, gateway.api_key_env)
        except key_vault.KeyUnavailable as exc:
            return str(exc)
    return None


def _load() -> tuple[dict[int, GatewayConfig], int, dict[int, GatewayConfig]]:
    default = _ensure_default()
    configs: dict[int, GatewayConfig] = {}
    unusable: dict[int, GatewayConfig] = {}
    for gateway in Gateway.objects.filter(enabled=True):
        try:
            configs[gateway.pk] = resolve(gateway)
        except (key_vault.KeyUnavailable, GatewayUnusable) as exc:
            logger.warning("Gateway %r is unusable: %s", gateway.name, exc)
            unusable[gateway.pk] = GatewayConfig(
                gateway.pk,
                gateway.name,
                "",
                "",
                gateway.dialect or None,
                gateway.cost_unit,
                gateway.emulated,
                unusable=str(exc),
            )
    default_pk = default.pk
    if default_pk not in configs and configs:
        default_pk = min(configs)  # the first usable row stands in for it
    return configs, default_pk, unusable


def configs(*, force: bool = False, checked: bool = False) -> tuple[dict[int, GatewayConfig], int]:
    """Every usable enabled gateway by pk, and the default's pk (cached for `CONFIGS_TTL`, and
    dropped when a gateway is saved in this process; `checked`: also when one was saved in
    another, which wrote a new `SharedVersion` token). Database work: call off the event loop."""
    global _configs
    now = time.monotonic()
    key = _settings_key()
    if (
        force
        or _configs is None
        or now - _configs[0] > CONFIGS_TTL
        or _configs[1] != key
        or (checked and _version() != _configs[5])
    ):
        version = _version()  # before the rows: a save meanwhile reads them again
        found, default_pk, unusable = _load()
        _configs = (now, key, found, default_pk, unusable, version)
    return _configs[2], _configs[3]


def unusable() -> list[GatewayConfig]:
    """The enabled rows that cannot be used, as of the configs last read (`configs`,
    `aconfigs`), each with its reason (`GatewayConfig.unusable`)."""
    return [] if _configs is None else list(_configs[4].values())


def forget_configs(**_: object) -> None:
    """Drop the cached configs (a gateway was saved or deleted; tests between databases)."""
    global _configs, _refreshing
    _configs = _refreshing = None


def config_for(gateway_pk: int | None) -> GatewayConfig:
    """The config of gateway `gateway_pk` (None: the default), checked again as `aconfig_for`
    does when not known here. Raises `GatewayUnavailable`."""
    found, default_pk = configs()
    if gateway_pk is not None and gateway_pk not in found:
        found, default_pk = configs(checked=True)
    return _pick(found, default_pk, gateway_pk)


def _pick(
    found: dict[int, GatewayConfig], default_pk: int, gateway_pk: int | None
) -> GatewayConfig:
    config = found.get(default_pk if gateway_pk is None else gateway_pk)
    if config is None:
        raise GatewayUnavailable("That gateway is not available; choose another model.")
    return config


async def aconfigs(*, checked: bool = False) -> tuple[dict[int, GatewayConfig], int]:
    """`configs` from the event loop, with no thread hop while the cache is fresh: a new chat's
    upstream request is sent before anything else is done. A stale cache is served while one
    refresh runs for everyone; only an empty (or invalidated) one is waited for, once for all
    (50 new chats arriving together after an idle spell refreshed it 50 times, 0.2 s of their
    first tokens). `checked` (the picker, a send on a gateway not known here): the cache is
    first compared with the database's `SharedVersion` token, so that a gateway another process
    saved is in the next page at once, not `CONFIGS_TTL` later."""
    global _refreshing
    if _refreshing is not None and _refreshing.get_loop() is not asyncio.get_running_loop():
        _refreshing = None  # a refresh begun on a loop since closed (tests run one loop each)
    cached = _configs
    if checked and cached is not None and await sync_to_async(_version)() != cached[5]:
        cached = None  # saved elsewhere: read again, as an empty cache is
    if cached is not None and cached[1] == _settings_key():
        if time.monotonic() - cached[0] > CONFIGS_TTL and _refreshing is None:
            _refreshing = asyncio.ensure_future(_refresh())
        return cached[2], cached[3]
    if _refreshing is None:
        _refreshing = asyncio.ensure_future(_refresh())
    return await asyncio.shield(_refreshing)


async def _refresh() -> tuple[dict[int, GatewayConfig], int]:
    global _refreshing
    try:
        return await sync_to_async(configs)(force=True)
    finally:
        _refreshing = None


async def aconfig_for(gateway_pk: int | None) -> GatewayConfig:
    """`config_for` from the event loop (see `aconfigs`); a gateway not known here is looked for
    again once the cache is checked (another process's page may list it already)."""
    found, default_pk = await aconfigs()
    if gateway_pk is not None and gateway_pk not in found:
        found, default_pk = await aconfigs(checked=True)
    return _pick(found, default_pk, gateway_pk)


def _emulated(dialect: DialectFacts) -> dict[str, str]:
    """A gateway row's fields for the emulator's `dialect` (its path under the emulator's root)."""
    return {
        "base_url": dialect.emulator_path,
        "dialect": dialect.name,
        "cost_unit": default_unit(dialect.name),
        "speech_model": emulator.SPEECH_MODEL if dialect.speech else "",
        "transcription_model": emulator.TRANSCRIPTION_MODEL,
        "title_model": emulator.TITLE_MODEL,
        "embedding_model": emulator.EMBEDDING_MODEL,  # every dialect serves `/embeddings`
    }


def add_emulator_gateways() -> list[Gateway]:
    """Every dialect of the table as a gateway of the emulator (idempotent), so that all can be
    tried side by side offline. `EMULATOR_DIALECT` is the default "Emulator" row when nothing else
    is configured."""
    rows = _emulate_every_dialect(_ensure_default())
    forget_configs()
    return rows


def _emulate_every_dialect(default: Gateway) -> list[Gateway]:
    rows = []
    for dialect in emulated_dialects():
        if default.emulated and default.base_url == dialect.emulator_path:
            rows.append(default)
            continue
        row, _ = Gateway.objects.update_or_create(
            name=emulator_name(dialect),
            defaults={**_emulated(dialect), "emulated": True, "enabled": True},
        )
        rows.append(row)
    return rows


class GatewayUnavailable(ChatAppError):
    """The gateway asked for is disabled, unknown or has no readable key."""
