"""Plain words for a generation's state: the error line, the finish note and the meta line under
an answer.

A `finish_reason` other than `stop` is a state a user can read, not only a code in the meta line:
`length` says the answer (or the thinking before it) ran out of its token budget, and offers a
larger budget when only thinking arrived, as the Osmexo docs advise; `content_filter` says a
filter stopped or withheld the answer.

It reads an answer with its generation, so it stands with the answers in `conversations`; a tool
call's pane is the tools' (`tools/call_view.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from chatapp.conversations.models import Message
from chatapp.costs.models import Generation
from chatapp.costs.spending_limits import SPENDING_LIMIT
from chatapp.costs.token_budgets import larger_budget
from chatapp.gateways.units import CostUnit, Money

Status = Generation.Status
CostSource = Generation.CostSource


def _code(generation: Generation) -> str:
    parts = []
    if generation.error_status:
        parts.append(f"HTTP {generation.error_status}")
    if generation.error_code and generation.error_code != str(generation.error_status):
        parts.append(generation.error_code)
    if generation.error_type and generation.error_type not in parts:
        parts.append(generation.error_type)
    return f" ({', '.join(parts)})" if parts else ""


def answer_of(generation: Generation) -> Message:
    """The answer `generation` wrote (a chat answer or an image generation), or the one it read
    aloud. Not every generation has one: a title generation writes only the conversation's
    title, and an answer deleted with its conversation leaves its generation behind; for those
    this raises `Message.DoesNotExist`. Only what renders an answer asks for it."""
    reading = generation.kind == Generation.Kind.READ_ALOUD
    found = generation.read_aloud if reading else generation.message
    if found is None:
        raise Message.DoesNotExist(f"generation {generation.pk} has no answer")
    return found


def error_text(generation: Generation) -> str:
    """What went wrong, for the user; empty for answers that did not fail."""
    message = generation.error_message.strip()
    answer = answer_of(generation)
    has_text = bool(answer.content or answer.reasoning)
    kept = " The partial answer is kept." if has_text else ""
    said = f": {_sentence(message)}" if message else "."
    match generation.status:
        case Status.FAILED if not has_text and generation.error_status:
            text = f"The gateway refused the request{_code(generation)}{said}"
        case Status.FAILED:
            text = f"The answer failed{_code(generation)}{said}{kept}"
        case Status.INCOMPLETE:
            text = (
                "The answer was cut off: the stream ended before the gateway said it was done"
                f"{_code(generation)}.{kept}"
            )
        case Status.INTERRUPTED:
            text = message or "The server stopped while writing this answer."
        case _:
            return ""
    if generation.retry_after:
        text += f" Retry after {generation.retry_after:g} s."
    return text


def _sentence(message: str) -> str:
    """The gateway's message as a sentence, so that ours can follow it."""
    return message if message.endswith((".", "!", "?", "…")) else message + "."


WARNINGS = {
    "unread_parts": "The gateway sent parts this app could not read, so the answer shows empty.",
}


def warning_texts(generation: Generation) -> list[str]:
    """What the stream reader warned of, in words (unknown codes are named as they are)."""
    return [
        WARNINGS.get(code, f"Warning from the stream reader: {code}.")
        for code in generation.warnings
    ]


@dataclass(frozen=True, slots=True)
class FinishNote:
    """Why an answer ended where it did; `larger_budget`: "Continue with a larger budget" is
    offered."""

    text: str
    larger_budget: bool = False


def finish_note(generation: Generation) -> FinishNote | None:
    """The note under an answer that ended for a reason other than being done, else None."""
    if generation.is_running:
        return None
    message = answer_of(generation)
    answered = bool(message.content.strip())
    match generation.finish_reason:
        case "length" if message.reasoning and not answered:
            return FinishNote(
                "The token budget ran out while the model was thinking, before it answered.",
                larger_budget=larger_budget(generation) is not None,
            )
        case "length" if generation.budget_capped_by:
            tokens = generation.max_tokens or generation.completion_tokens
            budget = f"{tokens:,} tokens, " if tokens else ""
            return FinishNote(
                f"The answer was cut off at the budget ({budget}all that "
                f"{generation.budget_capped_by} had left allowed)."
            )
        case "length":
            tokens = generation.completion_tokens or generation.max_tokens
            budget = f" ({tokens:,} tokens)" if tokens else ""
            return FinishNote(f"The answer was cut off at the token budget{budget}.")
        case "content_filter" if answered or message.reasoning:
            return FinishNote(
                "A content filter (the gateway's or the model provider's) stopped the answer"
                " here; what arrived before it is kept."
            )
        case "content_filter":
            return FinishNote(
                "A content filter (the gateway's or the model provider's) withheld the answer,"
                " so there is nothing to show."
            )
    return _tool_note(message)


def _tool_note(message: Message) -> FinishNote | None:
    """Why a turn that called tools ended at this answer, when it did not end in an answer."""
    statuses = {call.get("status") for call in message.tool_calls}
    if not statuses or statuses == {None}:
        return None
    if "not_run" in statuses:
        reason = next(c["result"] for c in message.tool_calls if c.get("status") == "not_run")
        return FinishNote(f"The turn stopped here. {reason}")
    if "cancelled" in statuses:
        return FinishNote("Stopped while the tools ran; the model was not sent their results.")
    continued = message.children.filter(role=Message.Role.ASSISTANT).exists()
    generation = getattr(message, "generation", None)
    if not continued and generation is not None and generation.error_type == SPENDING_LIMIT:
        return FinishNote(f"The tools ran, but the turn stopped here: {generation.error_message}")
    if not continued:
        return FinishNote(
            "The tools ran, but the model was not asked to go on (the turn was stopped, or its"
            " gateway is not available); Regenerate to try again."
        )
    return None


def money(generation: Generation) -> Money | None:
    if generation.cost is None:
        return None
    unit = generation.cost_unit if generation.cost_unit in CostUnit.values else CostUnit.CREDITS
    return Money(generation.cost, CostUnit(unit))


def format_cost(generation: Generation) -> str:
    """The cost as a user reads it: the amount in its unit, or what stands for it and why."""
    amount = money(generation)
    if amount is not None:
        if generation.cost_source == CostSource.ESTIMATE:
            return f"≈{amount} (estimate)"
        return str(amount)
    note = generation.cost_note
    match generation.cost_source:
        case CostSource.PENDING:
            return "cost pending"
        case CostSource.NOT_BILLED:
            return f"not billed ({note})" if note else "not billed"
        case CostSource.UNAVAILABLE:
            return f"cost unavailable: {note}" if note else "cost unavailable"
    return "cost unknown"


def _images_made(generation: Generation) -> list[str]:
    """How many images an image generation was billed for (its usage's `output_images`)."""
    usage = generation.usage if isinstance(generation.usage, dict) else {}
    count = usage.get("output_images")
    if not isinstance(count, int) or isinstance(count, bool):
        return []
    return [f"{count} image{'' if count == 1 else 's'}"]


def token_counts(generation: Generation, separator: str) -> str:
    """ "11 in · 42 out (7 reasoning) · 5 cached" (with `separator`), or "" when not reported."""
    if generation.total_tokens is None:
        return ""
    tokens = f"{generation.prompt_tokens or 0} in{separator}{generation.completion_tokens or 0} out"
    if generation.reasoning_tokens:
        tokens += f" ({generation.reasoning_tokens} reasoning)"
    if generation.cached_tokens:
        tokens += f"{separator}{generation.cached_tokens} cached"
    return tokens


def meta_items(generation: Generation) -> list[str]:
    items = [generation.served_model or generation.model]
    tokens = token_counts(generation, " · ")
    if generation.kind == Generation.Kind.IMAGE:
        items += _images_made(generation)  # an image stream's token counts are all 0
    elif tokens:
        items.append(tokens + " tokens")
    items.append(format_cost(generation))
    if generation.ttft_ms is not None:
        items.append(f"first token {generation.ttft_ms} ms")
    # "length" and "content_filter" are said in words by `finish_note`.
    if generation.finish_reason not in ("", "stop", "error", "length", "content_filter"):
        items.append(f"finish: {generation.finish_reason}")
    return items
