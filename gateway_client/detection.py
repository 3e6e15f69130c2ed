"""Which gateway is behind a base URL, from what it sends: the dialect table's URL hints, its
marker headers on a `/models` answer (LiteLLM's `x-litellm-version`), and the endpoints only one
server answers (LiteLLM's readiness details, vLLM's `/version`, Ollama's `/api/version`,
llama.cpp's `/props`), asked at the server's root.

Asked once per gateway whose dialect an admin left blank (`chatapp.gateways.detected`); a
gateway that answers none of them stays of unknown dialect, which gets only what every
OpenAI-compatible gateway takes. Every probe is bounded (64 KiB, 5 s) and its body untrusted: only
a JSON object with the expected key counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import orjson

from .dialects import DIALECTS, detect_dialect, guess_dialect
from .errors import GatewayError

if TYPE_CHECKING:
    from .client import GatewayClient

__all__ = ["Detection", "detect", "server_root"]

# The API roots the table's gateways serve under, longest first: what a base URL ends in.
_API_PATHS = sorted({dialect.base_path for dialect in DIALECTS.values()} | {"/v1"}, key=len)[::-1]


@dataclass(frozen=True, slots=True)
class Detection:
    """What a probe found: `dialect` (None: none of the table's) and `evidence`, in words, for
    the admin ("x-litellm-version: 1.80.0 on its /models answer")."""

    dialect: str | None
    evidence: str


def server_root(base_url: str) -> str:
    """`base_url` without the API path it ends in (`http://h:8000/v1` → `http://h:8000`)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path
    for api_path in _API_PATHS:
        if path.endswith(api_path):
            path = path[: -len(api_path)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


async def detect(client: GatewayClient, *, probe_seconds: float = 5.0) -> Detection:
    """Probe the gateway `client` speaks to (at most one request per probe, in the order URL,
    `/models` headers, the table's `probes`, each within `probe_seconds`); `GatewayError` when
    it cannot be reached, or when no probe fitted and one of them went unanswered: a busy
    server's silence is not evidence that it is none of the known gateways."""
    guessed = guess_dialect(client.base_url)
    if guessed is not None:
        return Detection(guessed, f"its URL names {DIALECTS[guessed].title}")
    _, headers, _ = await client.get_capped(f"{client.base_url}/models")
    found = detect_dialect(headers, None)
    if found is not None:
        named = next((n for n in DIALECTS[found].marker_headers if n in headers), "x-generation-id")
        value = headers.get(named, "")[:60]
        return Detection(found, f"{named}: {value} on its /models answer")
    root = server_root(client.base_url)
    unanswered: GatewayError | None = None
    for dialect in DIALECTS.values():
        for path, key in dialect.probes:
            try:
                status, _, body = await client.get_capped(root + path, seconds=probe_seconds)
            except GatewayError as exc:
                unanswered = exc
                continue
            if status == 200 and _has_key(body, key):
                return Detection(dialect.name, f"GET {path} answered as {dialect.title} does")
    if unanswered is not None:
        raise unanswered
    return Detection(None, "it answered none of the known gateways' probes")


def _has_key(body: bytes, key: str) -> bool:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and key in parsed
