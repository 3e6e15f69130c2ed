"""Which gateway we talk to, and the deadlines its documentation implies.

The chunk reader needs no dialect (it reads every shape by field presence); what differs is how
long silence is normal. Numes sends no keep-alives and allows 10 minutes per request, so a short
read timeout there would cut healthy streams; tiny-3b ends a stream itself after 2 s of silence.
The dialect is guessed from the base URL first (before any byte arrives), then from the response
headers, and can always be set explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import httpx

__all__ = ["DIALECTS", "Limits", "Timeouts", "default_timeouts", "detect_dialect", "guess_dialect"]

DIALECTS = ("numes", "osmexo", "tiny", "nodul")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds; None means no limit. `first_token` runs from sending the request to the first
    event (headers may be deferred until then), `idle` between events (keep-alive comments do not
    count: they show the connection is up, not that the answer progresses), `total` for the whole
    stream."""

    connect: float = 10.0
    first_token: float | None = 600.0
    idle: float | None = 600.0
    total: float | None = None

    def with_(self, **changes: Any) -> Timeouts:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps that keep a broken or hostile upstream from exhausting memory."""

    max_line_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = 32 * 1024 * 1024
    max_body_bytes: int = 128 * 1024 * 1024
    max_error_body_bytes: int = 64 * 1024


# Each a little above the gateway's own limit, so the gateway's in-band error arrives first.
_DEFAULTS = {
    "numes": Timeouts(first_token=610.0, idle=610.0, total=620.0),
    "osmexo": Timeouts(first_token=610.0, idle=75.0, total=None),
    "tiny": Timeouts(first_token=120.0, idle=15.0, total=None),
    "nodul": Timeouts(first_token=135.0, idle=135.0, total=915.0),
}


def default_timeouts(dialect: str | None) -> Timeouts:
    return _DEFAULTS.get(dialect or "", Timeouts())


def guess_dialect(base_url: str) -> str | None:
    """From the base URL alone (host or path naming the gateway, as the emulator's do)."""
    lowered = base_url.lower()
    for name, hints in (
        ("numes", ("numes",)),
        ("osmexo", ("osmexo",)),
        ("tiny", ("tiny-3b", "/tiny/", "tiny3b")),
        ("nodul", ("nodul",)),
    ):
        if any(hint in lowered for hint in hints):
            return name
    return None


def detect_dialect(headers: httpx.Headers, fallback: str | None) -> str | None:
    """From a stream's response headers; `fallback` when they do not tell."""
    if "x-llm-model" in headers or "x-llm-cost-micro" in headers:
        return "osmexo"
    generation_id = headers.get("x-generation-id")
    if generation_id:
        if fallback in ("numes", "nodul"):
            return fallback
        return "nodul" if generation_id.startswith("gen-") else "numes"
    return fallback
