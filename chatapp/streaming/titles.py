"""A new conversation's title, written by a model from its first exchange.

Once the first answer of a conversation completes, the model its gateway names for titles
(`Gateway.title_model`; empty: the conversation's own) is asked for a few words, as a
`Generation` of kind `title`: in the cost ledger with its own ID and cost, within the user's
spending limits (a title they cannot afford is not asked for), settled like any other. The title
replaces the first line only while the conversation still has it (`Conversation.title_source`):
a rename always wins, before or after. When no model answers (refused, failed, empty), the
first-line title stays. Every tab of the user is told the new title over its socket.

Asked once per conversation: a Regenerate of the first answer does not title it again.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatapp import records_thread
from chatapp.conversations import user_text
from chatapp.conversations.jobs import JobEnd
from chatapp.conversations.models import Conversation, Message
from chatapp.costs import settling, spending_limits
from chatapp.costs.models import Generation
from chatapp.gateways.clients import shared_client
from chatapp.gateways.configs import GatewayConfig, GatewayUnavailable, config_for
from chatapp.messaging import layer_errors, socket_messages
from chatapp.streaming import persistence
from chatapp.streaming.ticker import current_ticker
from gateway_client.errors import GatewayError, IncompleteStream, StatusError

__all__ = ["TITLE_MAX_TOKENS", "clean_title", "running_pks", "start_after"]

logger = logging.getLogger(__name__)

TITLE = Generation.Kind.TITLE
Status = Generation.Status

TITLE_MAX_TOKENS = 24
# What of the exchange the model reads: enough to tell its subject, never a long prompt's cost.
EXCERPT_CHARS = 1500
# A title request is short; one that takes longer than this has failed.
TITLE_SECONDS = 30.0
TITLE_CHARS = 80

INSTRUCTION = (
    "Write a title for the conversation below: at most six words, in the language of the "
    "question. Reply with the title alone: no quotes, no markdown, no full stop."
)

# Marks and quotes a model may wrap its title in (the typographic ones by their code points).
_QUOTES = "*_`\"' \u201c\u201d\u2018\u2019\u00ab\u00bb"

# Answers come first: while more than `CROWD` answers stream in this process, a title waits
# (for at most `CROWD_WAIT` seconds). At 200 answers, the titles of those that ended first took
# 8% of the server while the others still streamed.
CROWD = 10
CROWD_WAIT = 120.0

_running: set[int] = set()
_tasks: set[asyncio.Task[None]] = set()


@dataclass(frozen=True, slots=True)
class TitleStart:
    """A title generation just created: what its request needs."""

    generation_pk: int
    conversation_pk: int
    user_pk: int
    config: GatewayConfig
    model: str
    messages: list[dict[str, str]]


def running_pks() -> set[int]:
    return set(_running)


def clean_title(text: str) -> str:
    """The model's reply as a title: its first line, without markdown marks, quotes or a final
    full stop, on one line and at most `TITLE_CHARS` long; "" when nothing is left."""
    line = next((line for line in text.strip().splitlines() if line.strip()), "")
    line = line.strip().lstrip("#>*-• ").strip()
    line = line.removeprefix("Title:").removeprefix("title:").strip()
    line = line.strip(_QUOTES).rstrip(".").strip()
    line = user_text.one_line(line)
    if len(line) > TITLE_CHARS:
        line = line[: TITLE_CHARS - 1].rstrip() + "…"
    return line


def start_after(answer_generation_pk: int) -> None:
    """Title the conversation of the answer that just completed, if it is the conversation's first
    exchange and still has its first-line title: in a task of its own, never holding up (or
    failing) the answer's worker, and after a crowd of answers streaming in this process.
    Nothing with `CHAT_TITLES` off."""
    if not settings.CHAT_TITLES:
        return
    task = asyncio.get_running_loop().create_task(
        _title(answer_generation_pk), context=contextvars.Context()
    )
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def _after_the_crowd() -> None:
    """Return once at most `CROWD` answers stream in this process (or `CROWD_WAIT` has passed)."""
    try:
        ticker = current_ticker()
    except RuntimeError:  # no answer ever ran on this loop
        return
    try:
        async with asyncio.timeout(CROWD_WAIT):
            await ticker.until_at_most(CROWD)
    except TimeoutError:
        logger.info("A title starts while more than %d answers still stream", CROWD)


async def _title(answer_generation_pk: int) -> None:
    try:
        await _after_the_crowd()
        start = await records_thread.on_record_thread_when_idle(_create, answer_generation_pk)
    except Exception:
        logger.exception("The title for generation %s could not start", answer_generation_pk)
        return
    if start is None:
        return
    _running.add(start.generation_pk)
    try:
        end, title = await _ask(start)
        final = await persistence.save_title(start.generation_pk, end, title)
    finally:
        _running.discard(start.generation_pk)
    if title and end.status == Status.COMPLETED:
        await _tell(start, title)
    await settling.settle(shared_client(start.config), start.generation_pk, start.user_pk, final)
    await _conversation_total_changed(answer_generation_pk, start.conversation_pk)


def _create(answer_generation_pk: int) -> TitleStart | None:
    """The title generation for the answer's conversation, or None: not its first exchange,
    titled (or asked) already, renamed, temporary, no gateway, or over a spending limit."""
    answer = (
        Generation.objects.select_related("message__parent", "conversation")
        .filter(pk=answer_generation_pk, kind=Generation.Kind.CHAT, status=Status.COMPLETED)
        .first()
    )
    conversation = answer.conversation if answer is not None else None
    message: Message | None = answer.message if answer is not None else None
    question = message.parent if message is not None else None
    while question is not None and question.role == Message.Role.ASSISTANT:  # a tool round's
        question = question.parent
    if answer is None or conversation is None or question is None or question.parent_id:
        return None
    if conversation.title_source != Conversation.TitleSource.FIRST_LINE:
        return None
    if conversation.temporary:  # listed nowhere: a title would be billed for nothing
        return None
    try:
        config = config_for(conversation.gateway_id or answer.gateway_id)
    except GatewayUnavailable:
        return None
    model = config.title_model or answer.model
    messages = [
        {"role": "system", "content": INSTRUCTION},
        {
            "role": "user",
            "content": f"Question:\n{question.content[:EXCERPT_CHARS]}\n\n"
            f"Answer:\n{message.content[:EXCERPT_CHARS] if message else ''}",
        },
    ]
    ceiling = spending_limits.ceiling_for(
        config.pk, config.cost_unit, model, messages, TITLE_MAX_TOKENS, TITLE
    )
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if locked is None or locked.title_source != Conversation.TitleSource.FIRST_LINE:
            return None
        if locked.generations.filter(kind=TITLE).exists():
            return None
        try:
            watch = spending_limits.reserve(conversation.user_id, config.pk, ceiling, TITLE)
        except spending_limits.SpendingLimitReached as exc:
            logger.info("Conversation %s keeps its first line as title: %s", conversation.pk, exc)
            return None
        generation = Generation.objects.create(
            kind=TITLE,
            conversation=locked,
            user_id=conversation.user_id,
            gateway_id=config.pk,
            model=model[:200],
            max_tokens=TITLE_MAX_TOKENS,
            dialect=config.dialect or "",
            heartbeat_at=timezone.now(),
            spend_ceiling=watch.reserved if watch is not None else None,
        )
    return TitleStart(generation.pk, conversation.pk, conversation.user_id, config, model, messages)


async def _ask(start: TitleStart) -> tuple[JobEnd, str]:
    """Never raises: how the request ended, and the title it wrote ("" for none)."""
    client = shared_client(start.config)
    stream = client.stream_chat(
        model=start.model, messages=start.messages, max_tokens=TITLE_MAX_TOKENS
    )
    try:
        async with asyncio.timeout(TITLE_SECONDS), stream:
            async for _ in stream:
                pass
    except StatusError as exc:
        logger.warning("Title %s refused: %s", start.generation_pk, exc)
        return JobEnd(Status.FAILED, exc.info, completion=exc.completion), ""
    except IncompleteStream as exc:
        logger.warning("Title %s ended early: %s", start.generation_pk, exc)
        return JobEnd(Status.INCOMPLETE, exc.info, completion=exc.completion), ""
    except GatewayError as exc:
        logger.warning("Title %s failed: %s", start.generation_pk, exc)
        return JobEnd(Status.FAILED, exc.info, completion=exc.completion), ""
    except TimeoutError:
        logger.warning("Title %s took over %g s", start.generation_pk, TITLE_SECONDS)
        return JobEnd(Status.FAILED, completion=stream.completion), ""
    except Exception:
        logger.exception("Title %s crashed", start.generation_pk)
        return JobEnd(Status.FAILED, completion=stream.completion), ""
    completion = stream.completion
    return JobEnd(Status.COMPLETED, completion=completion), clean_title(completion.content)


async def _conversation_total_changed(answer_generation_pk: int, conversation_pk: int) -> None:
    """The conversation's pages: its running total changed. They hear it as the first answer
    being `updated`, whose refresh brings the header's total (`final_patch.js`)."""
    message = socket_messages.group_message(socket_messages.updated(answer_generation_pk))
    try:
        await socket_messages.channel_layer().group_send(
            socket_messages.group_name(conversation_pk), message
        )
    except layer_errors.LAYER_DOWN as exc:
        logger.warning("Conversation %s: its new total was not sent (%s)", conversation_pk, exc)


async def _tell(start: TitleStart, title: str) -> None:
    """Every tab of the user: the conversation's new title (the sidebar's, and the header's
    where it is on screen). Never raises: a page that misses it shows it at its next load."""
    message = socket_messages.group_message(socket_messages.retitled(start.conversation_pk, title))
    try:
        await socket_messages.channel_layer().group_send(
            socket_messages.user_group_name(start.user_pk), message
        )
    except layer_errors.LAYER_DOWN as exc:
        logger.warning(
            "Conversation %s: its new title was not sent (%s)", start.conversation_pk, exc
        )
