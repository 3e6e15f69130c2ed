"""A read aloud's rows: the `Generation` it starts as, its heartbeat, the audio kept from
an earlier completed read aloud, and what the page is told about the newest one.

A read aloud is a `Generation` of kind `speech` with `message=None` and `read_aloud=<the answer>`,
so the cost ledger, the sweep and reconciliation treat it like any other billed request. These
run on the records thread (`records_thread.on_record_thread`); its final state is written by
`save_read_aloud`, through the terminal write every kind shares (`persistence.write_terminal`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatapp.access import rate_limits
from chatapp.conversations.models import Message
from chatapp.costs import spending_limits
from chatapp.costs.models import Generation
from chatapp.costs.settling import FinalState
from chatapp.errors import ChatAppError
from chatapp.read_aloud.models import ReadAloudAudio
from chatapp.read_aloud.offer import SpeechSetup, speech_for
from chatapp.records_thread import on_final_thread
from chatapp.streaming.persistence import Ending, write_terminal

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from gateway_client.errors import ErrorInfo

__all__ = [
    "NoSuchAnswer",
    "ReadAloudEnd",
    "ReadAloudInFlight",
    "ReadAloudRefused",
    "ReadAloudStart",
    "beat",
    "create_read_aloud",
    "newest_read_aloud",
    "refusal",
    "save_read_aloud",
    "stopped_recently",
    "stored_audio",
]

READ_ALOUD = Generation.Kind.READ_ALOUD


class NoSuchAnswer(ChatAppError):
    """No answer of the user's has that key."""


class ReadAloudRefused(ChatAppError):
    """The answer cannot be read aloud (still being written, no text, no gateway that speaks,
    its read aloud stopped a moment ago)."""


class ReadAloudInFlight(ReadAloudRefused):
    """The answer is being read aloud already (in another process: one in this process is
    joined, `stream.start_or_join`)."""


IN_FLIGHT = (
    "This answer is being read aloud already (in another window?); once that read aloud is done "
    "it plays again for free."
)
# After a read aloud is stopped, how long before the answer may be read aloud again: hanging up and
# asking again at once would bill a new read aloud each time.
COOL_DOWN = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class ReadAloudStart:
    """A new read aloud's row and what to send upstream."""

    generation_pk: int
    text: str
    setup: SpeechSetup
    user_pk: int


@dataclass(frozen=True, slots=True)
class ReadAloudEnd:
    """How a read aloud ended, for `save_read_aloud`: the audio received (kept whatever
    the status, so that what was heard is on record) and, unless it completed, why not."""

    status: Generation.Status
    media_type: str
    audio: bytes
    upstream_id: str
    request_id: str
    ttft_ms: int | None
    error: ErrorInfo | None = None


def _answer(user: User, message_pk: int) -> Message:
    message = (
        Message.objects.select_related("generation")
        .filter(pk=message_pk, conversation__user=user, role=Message.Role.ASSISTANT)
        .first()
    )
    if message is None:
        raise NoSuchAnswer("No such answer.")
    return message


def stored_audio(user: User, message_pk: int) -> ReadAloudAudio | None:
    """The audio of the newest completed read aloud of the user's answer, to play again for free.
    An incomplete or stopped one is not reused: it would end early."""
    return (
        ReadAloudAudio.objects.filter(
            generation__read_aloud_id=message_pk,
            generation__user=user,
            generation__status=Generation.Status.COMPLETED,
        )
        .order_by("-generation_id")
        .first()
    )


def _claim(message_pk: int) -> None:
    """Make sure no read aloud of the answer is under way, nor was stopped a moment ago, for the
    rest of the transaction: the answer's row is locked (SQLite's immediate transactions lock
    the database), so of two processes starting a read aloud at once the second sees the first's
    row. `ReadAloudInFlight`, `ReadAloudRefused` otherwise."""
    Message.objects.select_for_update().filter(pk=message_pk).values_list("pk").first()
    _check_free(message_pk)


def _check_free(message_pk: int) -> None:
    now = timezone.now()
    read_alouds = Generation.objects.filter(kind=READ_ALOUD, read_aloud_id=message_pk)
    alive = now - timedelta(seconds=settings.CHAT_STALE_AFTER)
    if read_alouds.filter(status=Generation.Status.STREAMING, heartbeat_at__gt=alive).exists():
        raise ReadAloudInFlight(IN_FLIGHT)
    stopped = (
        read_alouds.filter(status=Generation.Status.CANCELLED, finished_at__gt=now - COOL_DOWN)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    if stopped is not None:
        raise ReadAloudRefused(stopped_recently(stopped + COOL_DOWN - now))


def refusal(user: User, message_pk: int) -> str:
    """Why a read aloud of the user's answer would be refused now (in flight, cooling down, the
    answer limit), or "": the page's player cannot read a refused response's words, so it asks
    for them (`views.read_aloud_state`)."""
    try:
        _check_free(message_pk)
        rate_limits.check_generation_start(user)
    except (ReadAloudRefused, rate_limits.RateLimited) as exc:
        return str(exc)
    return ""


def stopped_recently(wait: timedelta) -> str:
    """Why a read aloud stopped a moment ago is not started again yet, and for how long."""
    seconds = max(1, math.ceil(wait.total_seconds()))
    return (
        "Reading this answer aloud was stopped a moment ago; it can be read aloud again in "
        f"{seconds} s."
    )


def create_read_aloud(user: User, message_pk: int) -> ReadAloudStart:
    """A `streaming` read aloud of the user's finished answer `message_pk`: one at
    a time per answer (`_claim`), counted with the answers the user starts (`rate_limits`)."""
    rate_limits.check_generation_start(user)
    message = _answer(user, message_pk)
    written = getattr(message, "generation", None)
    if written is None or written.is_running or not message.content.strip():
        raise ReadAloudRefused("Only a finished answer with text can be read aloud.")
    setup = speech_for(written.gateway_id)
    if setup is None:
        raise ReadAloudRefused("No gateway here can read answers aloud.")
    row = {
        "kind": READ_ALOUD,
        "read_aloud": message,
        "conversation_id": message.conversation_id,
        "gateway_id": setup.config.pk,
        "model": setup.model[:200],
        "dialect": setup.dialect,
    }
    config = setup.config
    ceiling = spending_limits.ceiling_for(
        config.pk, config.cost_unit, setup.model, [], None, READ_ALOUD
    )
    try:
        with transaction.atomic():
            _claim(message_pk)
            spending_limits.reserve(user.pk, config.pk, ceiling, READ_ALOUD)
            generation = Generation.objects.create(**row, heartbeat_at=timezone.now())
    except spending_limits.SpendingLimitReached as exc:
        # Kept, not billed, so that the page's player can say why (`newest_read_aloud`).
        spending_limits.keep_refused(row, exc)
        raise ReadAloudRefused(str(exc)) from exc
    return ReadAloudStart(generation.pk, message.content, setup, user.pk)


def beat(generation_pk: int, upstream_id: str, request_id: str) -> None:
    """The read aloud is alive (the sweep leaves it alone), with the IDs known so far, so that a
    read aloud whose process died can still have its cost reconciled."""
    Generation.objects.filter(pk=generation_pk, status=Generation.Status.STREAMING).update(
        heartbeat_at=timezone.now(), upstream_id=upstream_id[:200], request_id=request_id[:200]
    )


def newest_read_aloud(user: User, message_pk: int) -> Generation | None:
    """The user's newest read aloud of the answer `message_pk`, if any."""
    return (
        Generation.objects.filter(kind=READ_ALOUD, read_aloud_id=message_pk, user=user)
        .order_by("-pk")
        .first()
    )


@on_final_thread
def save_read_aloud(generation_pk: int, end: ReadAloudEnd) -> FinalState:
    """A read aloud's terminal state and the audio it received, in one transaction."""

    def write(generation: Generation) -> None:
        generation.upstream_id = end.upstream_id[:200]
        generation.request_id = end.request_id[:200]

    with transaction.atomic():
        generation, final = write_terminal(
            generation_pk,
            Ending(end.status, end.error, delivered=bool(end.audio)),
            None,
            write,
            kind=Generation.Kind.READ_ALOUD,
            ttft_ms=end.ttft_ms,
        )
        if generation is not None and end.audio:
            ReadAloudAudio.objects.update_or_create(
                generation=generation, defaults={"media_type": end.media_type, "data": end.audio}
            )
    return final
