"""Websocket handshakes only from this site's exact origin: scheme, host and port.

A browser sends the user's cookies with a websocket handshake from any page, and cookies do not
tell ports apart: a page on `http://127.0.0.1:9001` carries the session of the app on `:8000`.
Channels' `AllowedHostsOriginValidator` compares host names only, so that page could open the
chat socket; here the `Origin` must be the origin the request itself names (its `Host` header,
which must be an allowed host, with the scheme this app serves: https behind a TLS proxy with
`DJANGO_HTTPS`, else the socket's own) or one of `CSRF_TRUSTED_ORIGINS` (the same origins HTTP
POSTs may come from, `https://*.example.com` patterns included).

A handshake without an `Origin` is refused: every browser sends one on a websocket handshake
(RFC 6455 §4.1 requires it of browser clients), so nothing the page opens lacks it, and a
client that omits it is not one whose cookies need protecting by this check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Origin | None:
        """`scheme://host[:port]`, or None for anything else (`null`, a path, a bad port)."""
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            return None
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return None
        if parts.path or parts.query or parts.fragment or parts.username is not None:
            return None
        return cls(parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme])

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


def _allowed_hosts() -> list[str]:
    hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:  # as Django's own host check
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def own_origin(scope: dict[str, Any], host: str) -> Origin | None:
    """The origin of the page that the request's `Host` names, if that host is this site's."""
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        return None
    secure = settings.DJANGO_HTTPS or scope.get("scheme") == "wss"
    return Origin.parse(f"{'https' if secure else 'http'}://{host}")


def trusted(origin: Origin, scope: dict[str, Any], host: str | None) -> bool:
    if host is not None and origin == own_origin(scope, host):
        return True
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "://*" in entry:  # a subdomain pattern, as CsrfViewMiddleware reads it
            scheme, _, pattern = entry.partition("://")
            if origin.scheme == scheme and is_same_domain(origin.netloc, pattern[1:]):
                return True
        elif origin == Origin.parse(entry):
            return True
    return False


def allowed(scope: dict[str, Any]) -> bool:
    headers = {name: value.decode("latin-1") for name, value in scope.get("headers", [])}
    origin = Origin.parse(headers.get(b"origin", ""))
    return origin is not None and trusted(origin, scope, headers.get(b"host"))


class SameOriginValidator:
    """ASGI middleware: a websocket handshake from another origin is answered 403."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and not allowed(scope):
            await WebsocketDenier()(scope, receive, send)
            return
        await self.application(scope, receive, send)
