"""The four gateways as one table (`DIALECTS`), and the deadlines each one's documentation implies.

Everything that differs by dialect and is not wire framing is a field of `DialectFacts`: the app's
choices, default cost units, request options, Read aloud and image offers and cost wording, and
the emulator's paths, all read it. Adding a gateway is one entry here plus its emulator (a
`gateway_client.emulator.dialects` class).

The chunk reader needs no dialect (it reads every shape by field presence); what differs is how
long silence is normal. Numes sends no keep-alives and allows 10 minutes per request, so a short
read timeout there would cut healthy streams; tiny-3b ends a stream itself after 2 s of silence.
The dialect is guessed from the base URL first (before any byte arrives), then from the response
headers, and can always be set explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import httpx

__all__ = [
    "DIALECTS",
    "DialectFacts",
    "Limits",
    "Timeouts",
    "default_timeouts",
    "detect_dialect",
    "facts_for",
    "guess_dialect",
    "titles",
]


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


@dataclass(frozen=True, slots=True)
class DialectFacts:
    """What one gateway's documentation says, as far as anything outside its wire framing asks."""

    name: str
    """The value a gateway row stores, `LLM_DIALECT` and `--dialect` take."""
    title: str
    base_path: str
    """The documented API root; the emulator serves the dialect at `/<name>` + this path."""
    url_hints: tuple[str, ...]
    """Lower-case pieces of a base URL that name this gateway (`guess_dialect`)."""
    timeouts: Timeouts
    """Each a little above the gateway's own limit, so the gateway's in-band error arrives first."""
    default_unit: str
    """What it bills in unless the key says otherwise: `usd`, `micro_usd`, `pnp` or `credits`."""
    reasoning_field: str | None
    """The delta field its stream carries reasoning in; None: it streams none."""
    effort_field: str | None = None
    """The request field that takes `{"effort": ...}`; None: its docs describe no reasoning
    control, so an effort is not sent."""
    tools: bool = True
    """Its docs describe tool calls (`delta.tool_calls`), so requests offer tools."""
    images: bool = False
    """It serves `POST /images`."""
    speech: bool = False
    """It serves `POST /audio/speech`."""
    generation_records: bool = False
    """It keeps a record per generation (`GET /generation`) to read a cost from afterwards."""
    streams_usage: bool = True
    """A usage chunk reports each stream's token counts (and cost)."""
    free_errors: tuple[tuple[str, str], ...] = ()
    """(error code, what it means) for the errors its docs say bill nothing."""
    free_before_output: tuple[tuple[str, str], ...] = ()
    """(error code, what it means) for the errors that bill nothing when no token was delivered."""

    @property
    def emulator_path(self) -> str:
        return f"/{self.name}{self.base_path}"


DIALECTS: dict[str, DialectFacts] = {
    dialect.name: dialect
    for dialect in (
        DialectFacts(
            name="numes",
            title="Numes",
            base_path="/api/v1",
            url_hints=("numes",),
            timeouts=Timeouts(first_token=610.0, idle=610.0, total=620.0),
            default_unit="usd",
            reasoning_field="reasoning",
            effort_field="reasoning",
            images=True,
            speech=True,
            generation_records=True,
        ),
        DialectFacts(
            name="osmexo",
            title="Osmexo",
            base_path="/v1",
            url_hints=("osmexo",),
            timeouts=Timeouts(first_token=610.0, idle=75.0, total=None),
            default_unit="micro_usd",
            reasoning_field="reasoning_content",
        ),
        DialectFacts(
            name="tiny",
            title="tiny-3b",
            base_path="/v1",
            url_hints=("tiny-3b", "/tiny/", "tiny3b"),
            timeouts=Timeouts(first_token=120.0, idle=15.0, total=None),
            default_unit="credits",
            reasoning_field=None,
            tools=False,
            streams_usage=False,
            free_errors=(("no_capacity", "no node took the request"),),
            free_before_output=(("upstream_stall", "stalled before any token"),),
        ),
        DialectFacts(
            name="nodul",
            title="Nodul",
            base_path="/api/v1",
            url_hints=("nodul",),
            timeouts=Timeouts(first_token=135.0, idle=135.0, total=915.0),
            default_unit="pnp",
            reasoning_field="reasoning",
        ),
    )
}
"""Every dialect this client knows, by name, in the order they are offered."""


def facts_for(name: str | None) -> DialectFacts | None:
    """The table's entry for `name` (None or "": unknown, as is a name not in the table)."""
    return DIALECTS.get(name or "")


def titles(dialects: Iterable[DialectFacts]) -> str:
    """The dialects' titles as a phrase: "Numes", "Numes and Nodul", "Numes, Osmexo and Nodul"."""
    named = [dialect.title for dialect in dialects]
    return " and ".join(filter(None, [", ".join(named[:-1]), *named[-1:]]))


def default_timeouts(dialect: str | None) -> Timeouts:
    found = facts_for(dialect)
    return found.timeouts if found is not None else Timeouts()


def guess_dialect(base_url: str) -> str | None:
    """From the base URL alone (host or path naming the gateway, as the emulator's do)."""
    lowered = base_url.lower()
    for dialect in DIALECTS.values():
        if any(hint in lowered for hint in dialect.url_hints):
            return dialect.name
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
