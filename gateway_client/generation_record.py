"""The gateway's own record of a generation (`GET /generation?id=`), read into a value type.

It is the authority on what was delivered and charged. The client fetches it; a `SpeechStream`
hands it back from `confirm()`; the app settles costs from it. Reading it is lenient: a field
that is missing or of the wrong type is `None`, never an error, because the record only ever
adds to what the stream already reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from .events import Cost

__all__ = ["GenerationRecord", "RecordOutcome", "parse_generation_record"]

# What a generation record says of its request (its `outcome` field): the gateway's word, unlike
# `accumulator.Outcome`, which is how a stream read by the client ended. The emulator writes it.
type RecordOutcome = Literal["completed", "cancelled", "error", "in_progress"]
OUTCOMES: tuple[RecordOutcome, ...] = get_args(RecordOutcome.__value__)


@dataclass(frozen=True, slots=True)
class GenerationRecord:
    """The gateway's own record of a generation: what was delivered and charged."""

    id: str
    outcome: RecordOutcome
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cached_tokens: int | None
    cost: Cost | None
    raw: dict[str, Any]


def parse_generation_record(generation_id: str, payload: Any) -> GenerationRecord:
    """The record in a `/generation` answer (`{"data": {...}}`, or the object alone), for the
    generation asked about as `generation_id`."""
    data = payload.get("data", payload) if isinstance(payload, dict) else {}
    if not isinstance(data, dict):
        data = {}
    amount = data.get("total_cost")
    said = data.get("outcome") or ("cancelled" if data.get("cancelled") else "completed")
    # A word we do not know is a settled outcome that is not a completion (`raw` keeps it).
    outcome: RecordOutcome = next((known for known in OUTCOMES if known == said), "error")

    def count(key: str) -> int | None:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return GenerationRecord(
        id=str(data.get("id") or generation_id),
        outcome=outcome,
        finish_reason=data.get("finish_reason"),
        prompt_tokens=count("tokens_prompt"),
        completion_tokens=count("tokens_completion"),
        reasoning_tokens=count("native_tokens_reasoning"),
        cached_tokens=count("native_tokens_cached"),
        cost=(
            Cost(amount, "credits", False)
            if isinstance(amount, int | float) and not isinstance(amount, bool)
            else None
        ),
        raw=data,
    )
