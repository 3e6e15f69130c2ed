"""The provider's endpoints, from its discovery document (`/.well-known/openid-configuration`).

mozilla-django-oidc wants each endpoint in a setting; an admin gives only the issuer, so the
document is fetched on the first sign-in and kept for `KEEP` seconds by each process (a provider
that moves its endpoints is followed within the hour without a restart). It is fetched on demand
rather than at start so that a provider down at start costs the sign-in button, not the app.
The document's `issuer` must be the configured one, exactly (OpenID Connect Discovery 1.0, 4.3):
otherwise a document served for another issuer could name the keys that the ID token is checked
with.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import requests
from django.conf import settings

KEEP = 3600.0  # seconds
WELL_KNOWN = "/.well-known/openid-configuration"
MAX_BYTES = 256 * 1024


class DiscoveryError(Exception):
    """The discovery document could not be fetched or does not describe the configured issuer."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    issuer: str
    authorization: str
    token: str
    userinfo: str
    jwks: str


_lock = threading.Lock()
_cached: tuple[float, Endpoints] | None = None


def endpoints() -> Endpoints:
    """The configured issuer's endpoints, fetched at most once per `KEEP` seconds."""
    global _cached
    with _lock:
        now = time.monotonic()
        if _cached is not None and now - _cached[0] < KEEP:
            return _cached[1]
        found = fetch(settings.CHAT_OIDC_ISSUER)
        _cached = (now, found)
        return found


def forget() -> None:
    global _cached
    with _lock:
        _cached = None


def fetch(issuer: str) -> Endpoints:
    url = issuer.rstrip("/") + WELL_KNOWN
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT, stream=True)
        response.raise_for_status()
        body = response.raw.read(MAX_BYTES + 1, decode_content=True)
        if len(body) > MAX_BYTES:
            raise DiscoveryError(f"{url} is larger than {MAX_BYTES} bytes")
        document = json.loads(body)
    except (requests.RequestException, ValueError) as exc:
        raise DiscoveryError(f"Could not read {url}: {exc}") from exc
    if not isinstance(document, dict):
        raise DiscoveryError(f"{url} is not a JSON object")
    if document.get("issuer") != issuer:
        raise DiscoveryError(
            f"{url} describes the issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    try:
        return Endpoints(
            issuer=issuer,
            authorization=str(document["authorization_endpoint"]),
            token=str(document["token_endpoint"]),
            userinfo=str(document["userinfo_endpoint"]),
            jwks=str(document["jwks_uri"]),
        )
    except KeyError as exc:
        raise DiscoveryError(f"{url} names no {exc.args[0]}") from exc
