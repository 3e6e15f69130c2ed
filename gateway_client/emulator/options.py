"""Knobs of the emulator: pacing, keep-alive cadence, limits and record finalisation.

`Options` is fixed when the app is created; a request can override the timing knobs for itself
through its URL query (`?ttft_ms=50&slow_start_s=1.5`) or a query-like suffix on the model name
(`emulator/slow-start?slow_start_s=1.5`), so tests and the browser can pick slow or fast behaviour
without restarting the emulator. Unknown or malformed overrides are ignored, never an error.
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

    @property
    def token_interval_s(self) -> float:
        return 1.0 / self.tokens_per_second if self.tokens_per_second > 0 else 0.0

    def with_overrides(self, query: str) -> Options:
        """A copy with the float-valued knobs named in `query` (a URL query string) replaced."""
        if not query:
            return self
        known = {f.name for f in fields(self)}
        changes: dict[str, float | int | None] = {}
        for key, raw in parse_qsl(query, keep_blank_values=True):
            if key not in known:
                continue
            try:
                value = float(raw)
            except ValueError:
                continue
            if not math.isfinite(value) or value < 0:
                continue
            changes[key] = int(value) if key == "long_tokens" else value
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]


def split_model_options(model: str) -> tuple[str, str]:
    """`"emulator/stall?stall_limit_s=1"` -> `("emulator/stall", "stall_limit_s=1")`."""
    name, _, query = model.partition("?")
    return name, query
