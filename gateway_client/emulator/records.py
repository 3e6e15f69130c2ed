"""Generation records: what each request asked for (budget, temperature, system message,
reasoning), what it delivered, what it cost and how it ended.

Every dialect records its requests here (gateways bill from their own counts); only Numes exposes
them over HTTP (`GET /generation?id=`). Like the real thing, a finished record keeps reading
`outcome: "in_progress"` for a short finalisation window before its final outcome shows.

Records are written by the server's event loop and read by tests from other threads, so the
registry guards its maps with a lock and records expose wall-clock timestamps (`time.time()`)
that tests can compare with their own, e.g. `cancelled_at - client_closed_at < 0.1`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..generation_record import RecordOutcome

__all__ = ["EmulatorRecord", "Registry"]


@dataclass(slots=True)
class EmulatorRecord:
    """One request's accounting, as the emulator keeps it (the client reads it back as a
    `gateway_client.GenerationRecord`). Mutated only by the stream that owns it."""

    id: str
    request_id: str
    dialect: str
    endpoint: str
    model: str
    scenario: str
    streamed: bool
    tokens_prompt: int = 0
    tokens_completion: int = 0
    native_tokens_reasoning: int = 0
    native_tokens_cached: int = 0
    total_cost: float | int = 0
    finish_reason: str | None = None
    final_outcome: RecordOutcome = "in_progress"
    """The outcome once settled; `outcome` hides it during the finalisation window."""
    error_code: int | str | None = None
    bytes_delivered: int = 0
    """Raw body bytes delivered (audio streams)."""
    # What the request asked for, as it arrived (None: not sent).
    max_tokens: int | None = None
    temperature: float | None = None
    system: str | None = None
    """The text of the request's leading system message."""
    reasoning: dict[str, Any] | None = None
    parts: list[dict[str, Any]] | None = None
    """The last user message's content parts, described (`parsing.describe_parts`): what an
    attached image or file arrived as. None when its content was a string."""
    sources: int = 0
    """The numbered sources its system messages quoted (`ChatRequest.sources`)."""
    created_at: float = field(default_factory=time.time)
    first_token_at: float | None = None
    finished_at: float | None = None
    cancelled_at: float | None = None
    """When the emulator saw the client disconnect (the `http.disconnect` message)."""
    settles_at: float | None = None
    """`time.time()` from which `outcome` reports `final_outcome`."""

    @property
    def outcome(self) -> RecordOutcome:
        if self.settles_at is None or time.time() < self.settles_at:
            return "in_progress"
        return self.final_outcome

    @property
    def settled(self) -> bool:
        return self.outcome != "in_progress"

    def to_api(self) -> dict[str, Any]:
        """The Numes `GET /generation` shape."""
        created = datetime.fromtimestamp(self.created_at, UTC).isoformat().replace("+00:00", "Z")
        outcome = self.outcome
        return {
            "data": {
                "id": self.id,
                "request_id": self.request_id,
                "model": self.model,
                "outcome": outcome,
                "finish_reason": None if outcome == "in_progress" else self.finish_reason,
                "tokens_prompt": self.tokens_prompt,
                "tokens_completion": self.tokens_completion,
                "native_tokens_prompt": self.tokens_prompt,
                "native_tokens_completion": self.tokens_completion,
                "native_tokens_reasoning": self.native_tokens_reasoning,
                "native_tokens_cached": self.native_tokens_cached,
                "total_cost": self.total_cost,
                "created_at": created,
                "streamed": self.streamed,
                "cancelled": outcome == "cancelled",
            }
        }


class Registry:
    """Records by generation id and by request id, plus the streams still running."""

    def __init__(self, *, finalize_delay_s: float = 0.3, keep: int = 10_000) -> None:
        self.finalize_delay_s = finalize_delay_s
        self._keep = keep
        self._lock = threading.Lock()
        self._by_id: dict[str, EmulatorRecord] = {}
        self._by_request: dict[str, EmulatorRecord] = {}
        self._active: dict[str, EmulatorRecord] = {}

    def add(self, record: EmulatorRecord) -> EmulatorRecord:
        with self._lock:
            self._by_id[record.id] = record
            self._by_request[record.request_id] = record
            self._active[record.id] = record
            while len(self._by_id) > self._keep:
                oldest = next(iter(self._by_id.values()))
                self._by_id.pop(oldest.id, None)
                self._by_request.pop(oldest.request_id, None)
        return record

    def finish(
        self,
        record: EmulatorRecord,
        outcome: RecordOutcome,
        *,
        finish_reason: str | None = None,
        error_code: int | str | None = None,
    ) -> None:
        """Settle `record` (once): it reads `in_progress` for the finalisation delay, then
        `outcome`. Pre-stream failures pass through the same window."""
        if record.settles_at is not None:
            return
        now = time.time()
        record.final_outcome = outcome
        record.finish_reason = finish_reason
        record.error_code = error_code
        record.finished_at = now
        record.settles_at = now + self.finalize_delay_s
        with self._lock:
            self._active.pop(record.id, None)

    def get(self, key: str) -> EmulatorRecord | None:
        """A record by generation id, or by request id."""
        with self._lock:
            return self._by_id.get(key) or self._by_request.get(key)

    def all(self) -> list[EmulatorRecord]:
        with self._lock:
            return list(self._by_id.values())

    @property
    def active(self) -> list[EmulatorRecord]:
        """Records of the streams still being generated."""
        with self._lock:
            return list(self._active.values())

    def latest(self, **match: Any) -> EmulatorRecord | None:
        """The newest record whose attributes equal `match` (e.g. `dialect="osmexo"`)."""
        for record in reversed(self.all()):
            if all(getattr(record, k) == v for k, v in match.items()):
                return record
        return None

    def wait_finished(self, key: str, timeout: float = 5.0) -> EmulatorRecord:
        """Block (polling) until the record `key` has ended (`final_outcome` is known), without
        waiting out the finalisation window during which `outcome` still reads in_progress."""
        return self._wait(key, timeout, lambda record: record.settles_at is not None)

    def wait_settled(self, key: str, timeout: float = 5.0) -> EmulatorRecord:
        """Block (polling) until the record `key` exists and shows its final outcome."""
        return self._wait(key, timeout, lambda record: record.settled)

    def _wait(
        self, key: str, timeout: float, ready: Callable[[EmulatorRecord], bool]
    ) -> EmulatorRecord:
        deadline = time.monotonic() + timeout
        while True:
            record = self.get(key)
            if record is not None and ready(record):
                return record
            if time.monotonic() > deadline:
                raise TimeoutError(f"generation {key!r} did not finish within {timeout} s")
            time.sleep(0.005)
