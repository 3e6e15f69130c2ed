"""What a generation cost when its stream did not say: the gateway's record, an estimate, or
the reason there is neither. Never a silent blank.

Every generation ends in one cost source (`Generation.CostSource`):
- `stream`: the usage chunk's amount (`estimate` when the gateway flagged it with
  `x_llm_usage_estimated`);
- `not_billed`: refused before the answer began (an HTTP error and no generation ID, or tiny-3b's
  `no_capacity`, or its `upstream_stall` with nothing delivered, which its docs say are free), or
  served by a self-hosted server (vLLM, Ollama, llama.cpp), which bills nothing;
- `pending` while the gateway's generation record may still give it (Numes documents
  `GET /generation`; the record appears shortly after the stream and may say `in_progress`);
- `record`: the record's amount;
- `estimate`: token counts (reported, or counted from the text at about 4 characters a token:
  no tokenizer is bundled) times the model's price (`pricing`), marked as an estimate;
- `unavailable`: no record and no price, with the reason in words.

`settle_cost_now` runs on the records thread (`settling.settle_cost`), or inside a management
command's transaction; it is idempotent: a generation no longer `pending` is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from django.db import transaction

from chatapp.costs.models import Generation
from chatapp.gateways import pricing
from chatapp.gateways.units import CostUnit, exact, stream_unit
from gateway_client.dialects import facts_for

if TYPE_CHECKING:
    from gateway_client.accumulator import Completion
    from gateway_client.client import GenerationRecord
    from gateway_client.events import Cost, Usage

CostSource = Generation.CostSource

CHARS_PER_TOKEN = 4
# What an image the user attached counts as: about what the common vision models bill for a
# picture of a megapixel or so (its bytes say nothing of its tokens).
IMAGE_PROMPT_TOKENS = 1_000
# A record still missing (or `in_progress`) after this many rounds is given up on: estimated.
MAX_RECORD_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class Settled:
    """What `settle_cost_now` did: `changed` when the shown cost changed (browsers refetch)."""

    changed: bool
    source: str


def record_expected(generation: Generation) -> bool:
    """Whether the gateway keeps a record worth asking for this generation's cost (the dialect
    table's `generation_records`: only Numes documents one)."""
    facts = facts_for(generation.dialect)
    return bool(generation.upstream_id) and facts is not None and facts.generation_records


def not_billed_reason(generation: Generation, delivered_output: bool) -> str | None:
    """Why a generation that reported no cost cost nothing, if it did."""
    if (generation.error_status or 0) >= 400 and not generation.upstream_id:
        return "refused before the answer began"
    facts = facts_for(generation.dialect)
    if facts is not None and facts.self_hosted:
        return f"{facts.title} runs on its operator's own hardware and bills nothing"
    code = generation.error_code
    if facts is None or not code:
        return None
    if what := dict(facts.free_errors).get(code):
        return f"{what} ({facts.title} bills nothing for {code})"
    if (what := dict(facts.free_before_output).get(code)) and not delivered_output:
        return f"{what} ({facts.title} bills nothing then)"
    return None


def _gateway_title(generation: Generation) -> str:
    facts = facts_for(generation.dialect)
    return facts.title if facts is not None else "The gateway"


def _counted(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def counted_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """The prompt tokens of `messages`, counted: their text at about 4 characters a token (a
    message's text parts too), and `IMAGE_PROMPT_TOKENS` for each image part."""
    texts: list[str] = []
    images = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = [part for part in content if isinstance(part, Mapping)]
            texts.append("\n".join(str(part.get("text") or "") for part in parts))
            images += sum(1 for part in parts if part.get("type") == "image_url")
        else:
            texts.append(str(content or ""))
    return _counted("\n".join(texts)) + images * IMAGE_PROMPT_TOKENS


class AnswerText(Protocol):
    """An answer as an estimate reads it (`conversations.models.Message`): its text, and where it
    stands in its conversation, for the context it was sent."""

    @property
    def content(self) -> str: ...

    @property
    def reasoning(self) -> str: ...

    @property
    def conversation_id(self) -> int: ...

    @property
    def parent_id(self) -> int | None: ...


type ContextThrough = Callable[[int, int | None], Sequence[Mapping[str, Any]]]
"""The messages sent from a conversation's root down to a message, included: the tree's
`conversations.tree.context_through`."""

_context_through: list[ContextThrough] = []


def read_contexts_with(context_through: ContextThrough) -> None:
    """Count an answer's prompt from the context `context_through` reads. Conversations stand
    above costs, so the app tells costing how as it starts (`apps.ChatappConfig.ready`)."""
    _context_through[:] = [context_through]


def _context_tokens(message: AnswerText) -> int:
    if not _context_through:
        raise RuntimeError("costing.read_contexts_with was not called: is the app ready?")
    (context_through,) = _context_through
    return counted_prompt_tokens(context_through(message.conversation_id, message.parent_id))


_NOT_BY_THE_TOKEN = {
    Generation.Kind.READ_ALOUD: ("read aloud", "speech"),
    Generation.Kind.TRANSCRIPTION: ("transcription", "transcription"),
}


def estimate_or_explain(generation: Generation, message: AnswerText | None) -> None:
    """Set an estimate (with its basis) or `unavailable` (with the reason) on `generation`.
    `message`: the answer, to count tokens from when none were reported (None: deleted)."""
    model = generation.served_model or generation.model
    if generation.kind in _NOT_BY_THE_TOKEN:
        # Speech is billed by the character and transcription by the second, not the token: a
        # token price would misstate them.
        what, prices = _NOT_BY_THE_TOKEN[Generation.Kind(generation.kind)]
        generation.cost = None
        generation.cost_source = CostSource.UNAVAILABLE
        generation.cost_note = (
            f"{_gateway_title(generation)} reported no cost for this {what}, and {prices} "
            "prices are not kept here"
        )[:300]
        return
    price = pricing.price_for(generation.gateway_id, generation.model)
    if price is None and generation.served_model:
        price = pricing.price_for(generation.gateway_id, generation.served_model)
    if price is None:
        generation.cost = None
        generation.cost_source = CostSource.UNAVAILABLE
        facts = facts_for(generation.dialect)
        if facts is not None and not facts.streams_usage:
            what = f"{facts.title} streams report no usage"
        else:
            what = f"{_gateway_title(generation)} reported no cost for this answer"
        generation.cost_note = f"{what} and no price is configured for {model}"[:300]
        return
    counted = generation.prompt_tokens is None or generation.completion_tokens is None
    if counted and message is None:
        generation.cost = None
        generation.cost_source = CostSource.UNAVAILABLE
        generation.cost_note = (
            f"{_gateway_title(generation)} reported no token counts, and the answer was deleted "
            "before they could be counted from its text"
        )[:300]
        return
    prompt = generation.prompt_tokens
    completion = generation.completion_tokens
    if message is not None:  # else both were reported
        if prompt is None:
            prompt = _context_tokens(message)
        if completion is None:
            completion = _counted(message.content + message.reasoning)
    assert prompt is not None
    assert completion is not None
    generation.cost = Decimal(prompt) * price.prompt + Decimal(completion) * price.completion
    generation.cost_unit = generation.gateway.cost_unit if generation.gateway else CostUnit.CREDITS
    generation.cost_source = CostSource.ESTIMATE
    basis = "counted from the text (about 4 characters a token)" if counted else "reported"
    generation.cost_note = (
        f"estimated: {prompt} prompt + {completion} completion tokens {basis} "
        f"at the {'listed' if price.source == price.Source.GATEWAY else 'configured'} price "
        f"for {price.model}"
    )[:300]


_COUNTS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")


def apply_reported(
    generation: Generation, report: Completion | GenerationRecord | Usage
) -> Cost | None:
    """Copy the token counts and the cost (in its unit) a stream, a record or a usage object (a
    transcription's) reported; the cost, for the caller to name its source, or None when there
    was none."""
    for name in _COUNTS:
        value = getattr(report, name)
        if value is not None:
            setattr(generation, name, value)
    cost = report.cost
    if cost is not None:
        gateway_unit = generation.gateway.cost_unit if generation.gateway else ""
        generation.cost = exact(cost.amount)
        generation.cost_unit = stream_unit(cost.unit, gateway_unit)
    return cost


def apply_record(generation: Generation, record: GenerationRecord) -> bool:
    """Copy a settled record's counts and cost; True when it carried a cost."""
    if apply_reported(generation, record) is None:
        return False
    generation.cost_source = CostSource.RECORD
    generation.cost_note = ""
    return True


@dataclass(frozen=True, slots=True)
class Lookup:
    """What asking the gateway for a generation's record gave. `expected`: the gateway keeps
    records (else the cost is settled at once); `reached`: it answered (a gateway that is down
    leaves the cost pending, and the round does not count against `MAX_RECORD_ATTEMPTS`)."""

    record: GenerationRecord | None = None
    expected: bool = True
    reached: bool = True


def settle_cost_now(generation_pk: int, lookup: Lookup) -> Settled:
    """One reconciliation round for a `pending` generation (anything else is left alone)."""
    with transaction.atomic():
        generation = (
            Generation.objects.select_for_update(of=("self",))  # PostgreSQL: not the outer join
            .select_related("gateway")
            .filter(pk=generation_pk)
            .first()
        )
        if generation is None or generation.cost_source != CostSource.PENDING:
            return Settled(False, generation.cost_source if generation else "")
        record = lookup.record
        give_up = not lookup.expected
        if record is not None and record.outcome != "in_progress":
            generation.reconcile_attempts += 1
            if apply_record(generation, record):
                generation.save()
                return Settled(True, generation.cost_source)
            give_up = True  # a final record without a cost: it will not get one
        elif lookup.expected:
            if not lookup.reached:
                return Settled(False, generation.cost_source)
            generation.reconcile_attempts += 1  # not found yet, or still in progress
            give_up = generation.reconcile_attempts >= MAX_RECORD_ATTEMPTS
        if not give_up:
            generation.save(update_fields=["reconcile_attempts"])
            return Settled(False, generation.cost_source)
        # The answer's text, for a count (None: deleted with its conversation).
        estimate_or_explain(generation, generation.message)
        generation.save()
        return Settled(True, generation.cost_source)
