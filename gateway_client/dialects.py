"""The gateways as one table (`DIALECTS`), and the deadlines each one's documentation implies.

The table holds the four documented gateways (`../shared/gateway-docs/`, each served by the
built-in emulator) and the servers people run in front of providers or models (LiteLLM,
OpenRouter, vLLM, Ollama, llama.cpp), from their public documentation. Everything that differs by
dialect and is not wire framing is a field of `DialectFacts`: the app's choices, default cost
units, request options, request-ID headers, where prices come from, Read aloud and image offers
and cost wording, and the emulator's paths, all read it. Adding a gateway is one entry here (plus
its emulator, a `gateway_client.emulator.dialects` class, for one the emulator serves).

The chunk reader needs no dialect (it reads every shape by field presence); what differs is how
long silence is normal. Numes sends no keep-alives and allows 10 minutes per request, so a short
read timeout there would cut healthy streams; tiny-3b ends a stream itself after 2 s of silence.
The dialect is guessed from the base URL first (before any byte arrives), then from the response
headers; `gateway_client.detection` also asks the endpoints only one server serves. It can always
be set explicitly.
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
    "emulated_dialects",
    "facts_for",
    "guess_dialect",
    "header_request_id",
    "header_served_model",
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
    """Where a reasoning effort goes in the request: `reasoning.effort` (an object's member, as
    Numes and OpenRouter take it) or `reasoning_effort` (a top-level string, as OpenAI, LiteLLM,
    vLLM and Ollama take it); None: its docs describe no reasoning control, so none is sent."""
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
    emulator_serves: bool = False
    """The built-in emulator serves it (the four documented gateways)."""
    request_id_header: str = "x-request-id"
    """The response header naming the request as its operators search their logs for it."""
    model_header: str | None = None
    """A response header naming the model that served an alias (LiteLLM's routes)."""
    marker_headers: tuple[str, ...] = ()
    """Response headers only this gateway sends: one present identifies it."""
    probes: tuple[tuple[str, str], ...] = ()
    """(path under the server's root, a key its JSON object has) that only this server answers:
    `detection` asks them when neither the URL nor the headers tell."""
    prices_path: str | None = None
    """Where it serves per-token prices besides `/models`' `pricing` (LiteLLM's `/model/info`,
    under the server's root); None: nowhere else."""
    self_hosted: bool = False
    """A server people run on their own hardware: it bills nothing, so reports no cost."""
    retries_itself: bool = False
    """It retries a failed upstream call itself before answering (LiteLLM's `num_retries`), so
    its 5xx without `Retry-After` is final: a retry of ours would repeat all of its retries
    (`retries.retry_wait`)."""

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
            effort_field="reasoning.effort",
            images=True,
            speech=True,
            generation_records=True,
            emulator_serves=True,
        ),
        DialectFacts(
            name="osmexo",
            title="Osmexo",
            base_path="/v1",
            url_hints=("osmexo",),
            timeouts=Timeouts(first_token=610.0, idle=75.0, total=None),
            default_unit="micro_usd",
            reasoning_field="reasoning_content",
            emulator_serves=True,
            marker_headers=("x-llm-model", "x-llm-cost-micro"),
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
            emulator_serves=True,
        ),
        DialectFacts(
            name="nodul",
            title="Nodul",
            base_path="/api/v1",
            url_hints=("nodul",),
            timeouts=Timeouts(first_token=135.0, idle=135.0, total=915.0),
            default_unit="pnp",
            reasoning_field="reasoning",
            emulator_serves=True,
        ),
        # LiteLLM's proxy: `usage.cost` in US dollars, `x-litellm-call-id` per call, prices per
        # model at `/model/info`; it retries failed upstream calls itself (`x-litellm-*` headers).
        DialectFacts(
            name="litellm",
            title="LiteLLM",
            base_path="/v1",
            url_hints=("litellm",),
            timeouts=Timeouts(first_token=610.0, idle=610.0),
            default_unit="usd",
            reasoning_field="reasoning_content",
            effort_field="reasoning_effort",
            request_id_header="x-litellm-call-id",
            model_header="x-litellm-model-name",
            marker_headers=("x-litellm-version", "x-litellm-call-id"),
            # Its `/models` answer sends no x-litellm header; its readiness details name it (the
            # public `/health/readiness` did before 1.80, `/details` takes a key since).
            probes=(
                ("/health/readiness/details", "litellm_version"),
                ("/health/readiness", "litellm_version"),
            ),
            prices_path="/model/info",
            retries_itself=True,
        ),
        # OpenRouter: credits are US dollars; `/models` lists `pricing`; `GET /generation` keeps a
        # record per generation; `: OPENROUTER PROCESSING` comments keep a slow stream alive.
        DialectFacts(
            name="openrouter",
            title="OpenRouter",
            base_path="/api/v1",
            url_hints=("openrouter.ai",),
            timeouts=Timeouts(first_token=610.0, idle=610.0),
            default_unit="usd",
            reasoning_field="reasoning",
            effort_field="reasoning.effort",
            generation_records=True,
        ),
        DialectFacts(
            name="vllm",
            title="vLLM",
            base_path="/v1",
            url_hints=(),
            timeouts=Timeouts(),
            default_unit="usd",
            reasoning_field="reasoning",  # `reasoning_content` before; the reader takes both
            effort_field="reasoning_effort",
            probes=(("/version", "version"),),
            self_hosted=True,
        ),
        DialectFacts(
            name="ollama",
            title="Ollama",
            base_path="/v1",
            url_hints=(":11434", "ollama"),
            timeouts=Timeouts(),
            default_unit="usd",
            reasoning_field="reasoning",
            effort_field="reasoning_effort",
            probes=(("/api/version", "version"),),
            self_hosted=True,
        ),
        # llama.cpp's `llama-server`: its docs describe no reasoning-effort field for chat.
        DialectFacts(
            name="llamacpp",
            title="llama.cpp",
            base_path="/v1",
            url_hints=("llama-server", "llamacpp", "llama.cpp"),
            timeouts=Timeouts(),
            default_unit="usd",
            reasoning_field="reasoning_content",
            request_id_header="x-request-id",
            probes=(("/props", "default_generation_settings"),),
            self_hosted=True,
        ),
    )
}
"""Every dialect this client knows, by name, in the order they are offered."""


def emulated_dialects() -> list[DialectFacts]:
    """The dialects the built-in emulator serves (the four documented gateways), in table order."""
    return [dialect for dialect in DIALECTS.values() if dialect.emulator_serves]


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
    for dialect in DIALECTS.values():
        if any(name in headers for name in dialect.marker_headers):
            return dialect.name
    generation_id = headers.get("x-generation-id")
    if generation_id:
        if fallback in ("numes", "nodul"):
            return fallback
        return "nodul" if generation_id.startswith("gen-") else "numes"
    return fallback


def header_request_id(headers: httpx.Headers, dialect: str | None) -> str | None:
    """The request's ID as the gateway's operators know it: its dialect's header, else the common
    `x-request-id`."""
    facts = facts_for(dialect)
    names = (facts.request_id_header, "x-request-id") if facts is not None else ("x-request-id",)
    return next((value for name in names if (value := headers.get(name))), None)


def header_served_model(headers: httpx.Headers, dialect: str | None) -> str | None:
    """The model that served the request, where the dialect names it in a header."""
    facts = facts_for(dialect)
    if facts is None or facts.model_header is None:
        return None
    return headers.get(facts.model_header) or None
