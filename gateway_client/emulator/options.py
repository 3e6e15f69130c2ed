"""Knobs of the emulator: pacing, keep-alive cadence, limits, record finalisation, and how the
`tools` scenario calls tools.

`Options` is fixed when the app is created. Only when it is created with `request_options`
(tests, demos) may a request override a knob for itself, through its URL query
(`?ttft_ms=50&slow_start_s=1.5`) or a query-like suffix on the model name
(`emulator/slow-start?slow_start_s=1.5`, `emulator/tools?calls=3&rounds=2`), so tests and the
browser can pick slow or fast behaviour, or a model that misbehaves with tools, without
restarting the emulator; otherwise anyone who may name a model could make it answer a 2 MB
`long` (`?long_tokens=1000000`). Unknown or malformed overrides are ignored, never an error;
counts are clamped to their range, and times to ten minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from urllib.parse import parse_qsl

__all__ = ["Options", "split_model_options"]


@dataclass(frozen=True, slots=True)
class Options:
    """Emulator settings. Times in seconds unless the name says `_ms`."""

    tokens_per_second: float = 40.0
    ttft_ms: float = 400.0
    keepalive_interval_s: float = 15.0
    """Osmexo `: ping` / Nodul `: keepalive` cadence while waiting for the first token."""
    slow_start_s: float = 8.0
    """Time to first token of the `slow-start` scenario."""
    slow_start_keepalive_s: float = 1.0
    """Keep-alive cadence during `slow-start`, short so the comments are visible."""
    stall_limit_s: float | None = None
    """Silence after which a stalled stream gives up; None means each gateway's documented limit
    (Numes 600 s, Osmexo 60 s idle, Nodul 120 s idle, tiny-3b 2 s). Always capped at 600 s."""
    tiny_stall_s: float = 2.0
    """tiny-3b's gap between tokens that ends a stream with `upstream_stall`."""
    finalize_delay_ms: float = 300.0
    """How long a finished generation record still reads `in_progress`."""
    long_tokens: int = 3000
    """Approximate length of the `long` scenario."""
    calls: int = 1
    """`tools`: the calls in one round, of the request's first `calls` tools (cycling when it
    offers fewer), their argument fragments interleaved across the calls' indexes."""
    rounds: int = 1
    """`tools`: the rounds of tool results after the last user message before it answers
    (`rounds=99`: a model that never stops calling)."""
    args: str = "valid"
    """`tools`: `invalid` cuts every call's arguments short, so they are not JSON."""
    finish: str = "tool_calls"
    """`tools`: `stop` ends a round of calls with `finish_reason: "stop"`, as some models do."""

    @property
    def token_interval_s(self) -> float:
        return 1.0 / self.tokens_per_second if self.tokens_per_second > 0 else 0.0

    def with_overrides(self, query: str) -> Options:
        """A copy with the knobs named in `query` (a URL query string) replaced."""
        if not query:
            return self
        known = {f.name for f in fields(self)}
        changes: dict[str, float | int | str | None] = {}
        for key, raw in parse_qsl(query, keep_blank_values=True):
            if key not in known:
                continue
            if key in _CHOICES:
                if raw in _CHOICES[key]:
                    changes[key] = raw
                continue
            try:
                value = float(raw)
            except ValueError:
                continue
            if not math.isfinite(value) or value < 0:
                continue
            if key in _COUNTS:
                lowest, highest = _COUNTS[key]
                changes[key] = min(max(int(value), lowest), highest)
            elif key.endswith("_ms"):
                changes[key] = min(value, _LONGEST_S * 1000)
            elif key.endswith("_s"):
                changes[key] = min(value, _LONGEST_S)
            else:
                changes[key] = value
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]


_CHOICES: dict[str, tuple[str, ...]] = {
    "args": ("valid", "invalid"),
    "finish": ("tool_calls", "stop"),
}
"""The knobs that are words, and the words each takes."""
_COUNTS: dict[str, tuple[int, int]] = {
    "long_tokens": (0, 50_000),
    "calls": (1, 16),
    "rounds": (1, 1_000),
}
"""The knobs that are whole numbers, and their range."""
_LONGEST_S = 600.0
"""The longest a time knob may be set to (Numes's own stall limit)."""


def split_model_options(model: str) -> tuple[str, str]:
    """`"emulator/stall?stall_limit_s=1"` -> `("emulator/stall", "stall_limit_s=1")`."""
    name, _, query = model.partition("?")
    return name, query
