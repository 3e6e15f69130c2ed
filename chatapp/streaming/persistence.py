"""A generation's records: its final state, its settled cost, its interruption, all written on
one records thread (`chatapp.records_thread`, which new turns use too).

Partial answers are the writer's (`writer.py`: every running generation in one batch). The final
state (message and generation together) is one transaction: the text sent, and everything else
(IDs, usage, cost, finish reason, reasoning details, media) from the stream's `Completion`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from chatapp.conversations import knowledge_context, turns
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.costing import (
    apply_reported,
    not_billed_reason,
    record_expected,
)
from chatapp.costs.models import Generation
from chatapp.costs.settling import FinalState
from chatapp.costs.spending_limits import SPENDING_LIMIT, SpendingLimitReached
from chatapp.records_thread import on_final_thread
from chatapp.rendering import answer_html, attachments
from chatapp.rendering.markdown import citation
from chatapp.streaming import tool_loop

if TYPE_CHECKING:
    from chatapp.conversations.jobs import Job, JobEnd
    from chatapp.rendering.answer_html import RenderedAnswer
    from chatapp.streaming.live_state import LiveState
    from chatapp.streaming.tool_loop import CallRun
    from gateway_client.accumulator import Completion
    from gateway_client.errors import ErrorInfo
    from gateway_client.events import Usage

logger = logging.getLogger(__name__)

STREAMING = Generation.Status.STREAMING


@dataclass(frozen=True, slots=True)
class AnswerFinal(FinalState):
    """An answer's `FinalState`, with the next round of its turn when one was created with it
    (its tool calls ran)."""

    next_job: Job | None = None


def _apply_stream_counts_and_cost(generation: Generation, reported: Completion | Usage) -> None:
    """Copy the token counts and cost the stream's usage chunk (or a transcription's usage)
    reported."""
    cost = apply_reported(generation, reported)
    if cost is not None and cost.estimated:
        generation.cost_source = Generation.CostSource.ESTIMATE
        generation.cost_note = "estimated by the gateway (the provider reported no usage)"
    elif cost is not None:
        generation.cost_source = Generation.CostSource.STREAM


@on_final_thread
def save_final(
    generation_pk: int,
    state: LiveState,
    end: JobEnd,
    ttft_ms: int | None,
    request_id: str | None,
    dialect: str | None = None,
    *,
    thinking_ms: int | None = None,
    tool_runs: list[CallRun] | None = None,
    next_round_tools: tuple[dict[str, Any], ...] | None = None,
) -> AnswerFinal:
    """Write the terminal state in one transaction; returns what reconciliation needs.
    `dialect`: the one the stream was read as (else the gateway's). `tool_runs` are kept with
    their calls; with `next_round_tools` the turn's next round, offered those tools, is created
    in the same transaction, so the conversation is never without a running answer between the
    two.

    A generation that has ended already keeps its one terminal state: the sweep interrupted it
    (its heartbeat lapsed while the database was away), or this write committed before an error
    said otherwise and is being retried. Only text it lacks is added; no next round is made."""
    completion = end.completion
    sent = state.sent_part()

    def write(generation: Generation) -> None:
        # None: the conversation was deleted while it streamed. Its text goes with it; the
        # generation's facts (IDs, tokens, cost) are written all the same.
        if generation.message is not None:
            _write_answer(generation.message, sent, completion, tool_runs, state.final_render)
        generation.last_seq = state.seq
        generation.thinking_ms = thinking_ms
        generation.request_id = (
            request_id or (completion.request_id if completion else None) or ""
        )[:200]
        generation.dialect = (
            dialect or (generation.gateway.dialect if generation.gateway else "") or ""
        )
        generation.retry_after = end.retry_after

    def ended_before(generation: Generation) -> None:
        if generation.message is not None:
            _add_missing_text(generation.message, sent)

    with transaction.atomic():
        generation, final = write_terminal(
            generation_pk,
            Ending(end.status, end.error, delivered=bool(sent.content or sent.reasoning)),
            completion,
            write,
            ended_before=ended_before,
            ttft_ms=ttft_ms,
        )
        if generation is None:
            return AnswerFinal(final.upstream_id, final.cost_pending, final.record_expected)
        if generation.conversation_id is not None:
            Conversation.objects.filter(pk=generation.conversation_id).update(
                updated_at=generation.finished_at
            )
        completed = end.status == Generation.Status.COMPLETED
        next_job = None
        if next_round_tools is not None and completed and generation.message is not None:
            next_job = _next_round(generation.message, generation, next_round_tools)
    return AnswerFinal(final.upstream_id, final.cost_pending, final.record_expected, next_job)


@dataclass(frozen=True, slots=True)
class Ending:
    """How a generation ended, as its terminal write needs it: `delivered` when anything reached
    the user (else its unreported cost may be `not_billed`, `costing.not_billed_reason`)."""

    status: str
    error: ErrorInfo | None = None
    delivered: bool = False


def write_terminal(
    generation_pk: int,
    ending: Ending,
    completion: Completion | None,
    write: Callable[[Generation], None],
    *,
    kind: str | None = None,
    ended_before: Callable[[Generation], None] | None = None,
    ttft_ms: int | None = None,
) -> tuple[Generation | None, FinalState]:
    """A generation's terminal write, for every kind (inside the caller's transaction): it
    ends, from `completion` its IDs, usage and reported cost, `write` the kind's own fields,
    then what the cost is when nobody reported it. The generation (None: not written) and what
    settling needs (`costs.settling.settle`).

    A generation that has ended already keeps its one terminal state: the sweep interrupted it
    (its heartbeat lapsed while the database was away), or this write committed before an error
    said otherwise and is being retried. `ended_before` is then all that runs."""
    rows = Generation.objects.select_for_update(of=("self",))  # not the outer gateway join
    if kind is not None:
        rows = rows.filter(kind=kind)
    generation = rows.select_related("message", "gateway").filter(pk=generation_pk).first()
    if generation is None:  # never: a running generation is not folded away
        return None, FinalState(upstream_id="", cost_pending=False)
    if generation.status != STREAMING:
        if ended_before is not None:
            ended_before(generation)
        return None, FinalState(upstream_id=generation.upstream_id, cost_pending=False)
    now = timezone.now()
    generation.status = ending.status
    generation.finished_at = now
    generation.heartbeat_at = now
    generation.ttft_ms = ttft_ms
    if ttft_ms is not None:
        generation.first_token_at = generation.started_at + timedelta(milliseconds=ttft_ms)
    if completion is not None:
        generation.upstream_id = (completion.generation_id or "")[:200]
        generation.request_id = (completion.request_id or "")[:200]
        generation.served_model = (completion.model or "")[:200]
        generation.finish_reason = (completion.finish_reason or "")[:64]
        generation.warnings = list(completion.warnings)
        if completion.usage is not None:
            generation.usage = completion.usage
        _apply_stream_counts_and_cost(generation, completion)
    write(generation)
    if ending.error is not None:
        _apply_error(generation, ending.error)
    _mark_unreported_cost(generation, delivered=ending.delivered)
    generation.save()
    return generation, FinalState(
        upstream_id=generation.upstream_id,
        cost_pending=generation.cost_source == Generation.CostSource.PENDING,
        record_expected=record_expected(generation),
    )


def _write_answer(
    message: Message,
    sent: Completion,
    completion: Completion | None,
    tool_runs: list[CallRun] | None,
    rendered: RenderedAnswer | None = None,
) -> None:
    message.content = sent.content
    message.reasoning = sent.reasoning
    message.tool_calls = tool_loop.stored_calls(
        [call.to_dict() for call in sent.tool_calls], tool_runs
    )
    message.annotations = knowledge_context.passage_citations(message.annotations) + (
        [{**citation(a), "raw": a.raw} for a in completion.annotations] if completion else []
    )
    message.attachments = attachments.from_completion(completion) + [
        dict(item) for run in tool_runs or () for item in run.attachments
    ]
    message.reasoning_details = list(completion.reasoning_details) if completion else []
    answer_html.keep(message, rendered)  # the final render, made as the answer ended
    message.save()


def _add_missing_text(message: Message, sent: Completion) -> None:
    """Keep the text of an answer that ended without it (interrupted by the sweep, its final
    write late): what was shown to browsers is not lost."""
    longer = len(sent.content) > len(message.content) and sent.content.startswith(message.content)
    if longer:
        message.content = sent.content
        message.reasoning = sent.reasoning
        message.html, message.html_key = "", ""  # rendered again when next shown
        message.save(update_fields=["content", "reasoning", "html", "html_key"])


def _next_round(
    message: Message, generation: Generation, tools: tuple[dict[str, Any], ...]
) -> Job | None:
    """The turn's next round, or None (logged) when it cannot start (its gateway turned off): in
    a savepoint, so that the answer's own final state is written whatever happens here."""
    try:
        with transaction.atomic():
            return turns.create_tool_round(message, generation, tools).job
    except (OperationalError, InterfaceError):
        raise  # the whole write is retried
    except SpendingLimitReached as exc:  # said under the answer (`presentation.finish_note`)
        logger.info("Generation %s: its next tool round is over a spending limit", generation.pk)
        generation.error_type = SPENDING_LIMIT
        generation.error_message = str(exc)
        generation.save(update_fields=["error_type", "error_message"])
        return None
    except Exception:
        logger.exception("Generation %s: its next tool round could not start", generation.pk)
        return None


def _mark_unreported_cost(generation: Generation, *, delivered: bool) -> None:
    """A generation the stream reported no cost for: not billed, with the reason, when nothing
    was (`costing.not_billed_reason`), else pending for the reconciliation."""
    if generation.cost is not None:
        return
    free = not_billed_reason(generation, delivered)
    if free is not None:
        generation.cost_source = Generation.CostSource.NOT_BILLED
        generation.cost_note = free
    else:
        generation.cost_source = Generation.CostSource.PENDING


def _apply_error(generation: Generation, error: ErrorInfo) -> None:
    generation.error_status = error.status
    generation.error_code = "" if error.code is None else str(error.code)[:100]
    generation.error_type = (error.type or "")[:100]
    generation.error_message = error.message


@on_final_thread
def mark_interrupted(generation_pks: list[int]) -> list[tuple[int, int | None, int]]:
    """Interrupt the given generations if still streaming; (id, conversation, seq) of each (no
    conversation: it was deleted)."""
    now = timezone.now()
    done: list[tuple[int, int | None, int]] = []
    with transaction.atomic():
        for generation in Generation.objects.select_for_update().filter(
            pk__in=generation_pks, status=STREAMING
        ):
            generation.status = Generation.Status.INTERRUPTED
            generation.finished_at = now
            generation.error_type = "interrupted"
            generation.error_message = (
                "The server stopped while this answer was being written; the text so far is kept."
            )
            if generation.cost is None:  # settled by the sweep: a record, an estimate or a reason
                generation.cost_source = Generation.CostSource.PENDING
            generation.save()
            done.append((generation.pk, generation.conversation_id, generation.last_seq))
    return done


@on_final_thread
def mark_answerless_interrupted(generation_pks: list[int]) -> int:
    """Interrupt the given read alouds and titles if still streaming (their process died); how
    many. Their cost is never known mid-way: the sweep settles it."""
    now = timezone.now()
    count = 0
    for kind, words in _INTERRUPTED_WORDS.items():
        count += Generation.objects.filter(
            pk__in=generation_pks, kind=kind, status=STREAMING
        ).update(
            status=Generation.Status.INTERRUPTED,
            finished_at=now,
            error_type="interrupted",
            error_message=words,
            cost_source=Generation.CostSource.PENDING,
        )
    return count


_INTERRUPTED_WORDS = {
    Generation.Kind.READ_ALOUD: "The server stopped while reading this answer aloud.",
    Generation.Kind.TITLE: "The server stopped while this conversation's title was written.",
    Generation.Kind.TRANSCRIPTION: "The server stopped while it transcribed a recording.",
    Generation.Kind.EMBEDDING: "The server stopped while these texts were being embedded.",
}


# --- Transcriptions (`transcription.requests`) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class TranscriptionEnd:
    """How a transcription ended (`transcription.requests`), for `save_transcription`."""

    status: Generation.Status
    upstream_id: str
    request_id: str
    ttft_ms: int | None
    usage: Usage | None
    error: ErrorInfo | None = None


@on_final_thread
def save_transcription(generation_pk: int, end: TranscriptionEnd) -> FinalState:
    """A transcription's terminal state, its IDs and what its usage reported, in one
    transaction. The text is not kept: it goes to the person's message box, to send or not."""
    now = timezone.now()
    with transaction.atomic():
        generation = (
            Generation.objects.select_for_update(of=("self",))
            .select_related("gateway")
            .filter(pk=generation_pk, kind=Generation.Kind.TRANSCRIPTION)
            .first()
        )
        if generation is None:  # never: a running generation is not folded away
            return FinalState(upstream_id="", cost_pending=False)
        if generation.status != STREAMING:  # the sweep interrupted it: one terminal state
            return FinalState(upstream_id=generation.upstream_id, cost_pending=False)
        generation.status = end.status
        generation.finished_at = now
        generation.heartbeat_at = now
        generation.ttft_ms = end.ttft_ms
        if end.ttft_ms is not None:
            generation.first_token_at = generation.started_at + timedelta(milliseconds=end.ttft_ms)
        generation.upstream_id = end.upstream_id[:200]
        generation.request_id = end.request_id[:200]
        if end.usage is not None:
            generation.usage = end.usage.raw
            _apply_stream_counts_and_cost(generation, end.usage)
        if end.error is not None:
            _apply_error(generation, end.error)
        _mark_unreported_cost(generation, delivered=end.status == Generation.Status.COMPLETED)
        generation.save()
    return FinalState(
        upstream_id=generation.upstream_id,
        cost_pending=generation.cost_source == Generation.CostSource.PENDING,
        record_expected=record_expected(generation),
    )


# --- Titles (`streaming.titles`) -----------------------------------------------------------------


@on_final_thread
def save_title(generation_pk: int, end: JobEnd, title: str) -> FinalState:
    """A title generation's terminal state and, when it completed with a `title` and the
    conversation's title is still its first line, that title, in one transaction. The
    conversation's `updated_at` is left alone: a title is no activity of the user's."""
    completion = end.completion

    def write(generation: Generation) -> None:
        generation.dialect = generation.gateway.dialect if generation.gateway else ""

    with transaction.atomic():
        generation, final = write_terminal(
            generation_pk,
            Ending(
                end.status, end.error, delivered=completion is not None and bool(completion.content)
            ),
            completion,
            write,
            kind=Generation.Kind.TITLE,
        )
        if generation is None:
            return final
        if title and end.status == Generation.Status.COMPLETED and generation.conversation_id:
            Conversation.objects.filter(
                pk=generation.conversation_id, title_source=Conversation.TitleSource.FIRST_LINE
            ).update(title=title, title_source=Conversation.TitleSource.MODEL)
    return final
