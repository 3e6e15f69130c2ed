"""State shared by the streamed and buffered paths of one chat or text completion.

A `Generation` owns the request's ids, its `EmulatorRecord` and the running counts of what has
been delivered, and knows how to settle the record (outcome, finish reason, cost) exactly once.
The record's `cancelled_at` is stamped from the channel's disconnect callback, i.e. the moment
the `http.disconnect` message arrives, independent of when the generator loop notices.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..generation_record import RecordOutcome
from .channel import Channel
from .dialects import Dialect, Ids
from .options import Options
from .parsing import ChatRequest
from .records import EmulatorRecord, Registry
from .scenarios import Piece, Script

__all__ = ["Generation"]

_MAX_STALL_S = 600.0


@dataclass(slots=True)
class Generation:
    channel: Channel
    dialect: Dialect
    registry: Registry
    options: Options
    request: ChatRequest
    script: Script
    endpoint: str
    ids: Ids = field(init=False)
    record: EmulatorRecord = field(init=False)
    created: int = field(init=False)
    delivered: int = 0
    """Pieces delivered so far (an index into `script.pieces`)."""

    def __post_init__(self) -> None:
        self.ids = self.dialect.new_ids(text_completion=self.request.text_completion)
        self.created = int(time.time())
        self.record = self.registry.add(
            EmulatorRecord(
                id=self.ids.generation_id,
                request_id=self.ids.request_id,
                dialect=self.dialect.name,
                endpoint=self.endpoint,
                model=self.request.model,
                scenario=self.script.scenario,
                streamed=self.request.stream,
                tokens_prompt=self.script.prompt_tokens,
                max_tokens=self.request.max_tokens,
                temperature=self.request.temperature,
                system=self.request.system,
                reasoning=self.request.reasoning,
                parts=self.request.parts,
                sources=self.request.sources,
            )
        )
        self.channel.on_disconnect = self._on_disconnect
        if self.channel.disconnected_at is not None:
            self._on_disconnect(self.channel.disconnected_at)

    def _on_disconnect(self, when: float) -> None:
        if self.record.settles_at is None and self.record.cancelled_at is None:
            self.record.cancelled_at = when

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def seed(self) -> str:
        return self.ids.generation_id

    @property
    def stall_limit_s(self) -> float:
        """How long a stalled stream stays silent before the gateway gives up."""
        if self.dialect.silence_ends_stream:
            return self.options.tiny_stall_s
        limit = self.options.stall_limit_s
        return min(_MAX_STALL_S, self.dialect.stall_limit_s if limit is None else limit)

    @property
    def cost_estimate(self) -> float | int:
        budget = self.request.max_tokens or 256
        return self.dialect.cost(self.script.prompt_tokens, budget)

    def deliver(self, piece: Piece) -> None:
        """Count `piece` as delivered to the client."""
        self.delivered += 1
        record = self.record
        if record.first_token_at is None and piece.tokens:
            record.first_token_at = time.time()
        record.tokens_completion += piece.tokens
        if piece.kind == "reasoning":
            record.native_tokens_reasoning += piece.tokens
        record.total_cost = self.dialect.cost(record.tokens_prompt, record.tokens_completion)

    def settle(
        self,
        outcome: RecordOutcome,
        finish_reason: str | None = None,
        *,
        error_code: int | str | None = None,
        billed: bool = True,
    ) -> None:
        """Final accounting. `billed=False` charges nothing (failures before any output)."""
        record = self.record
        if billed:
            record.total_cost = self.dialect.cost(record.tokens_prompt, record.tokens_completion)
        else:
            record.total_cost = self.dialect.cost(0, 0)
        self.registry.finish(record, outcome, finish_reason=finish_reason, error_code=error_code)

    def cancelled(self) -> None:
        """The client went away: bill what was delivered, plus the prompt."""
        self.settle("cancelled", None)

    def failed(self, kind: str) -> None:
        """An error ended the generation; tiny-3b bills nothing if nothing was delivered."""
        code = self.dialect.error_code(kind)
        billed = kind != "before" and (
            self.record.tokens_completion > 0 or not self.dialect.free_when_empty
        )
        self.settle("error", "error", error_code=code, billed=billed)

    def dropped(self) -> None:
        """The emulated upstream vanished: the connection closes without an ending."""
        self.settle("error", None, error_code="connection_dropped")
