"""A Read aloud's rows: the speech `Generation` it starts as, its heartbeat, the audio kept from
an earlier complete reading, and what the page is told about the newest one.

A reading is a `Generation` of kind `speech` with `message=None` and `read_aloud=<the answer>`,
so the cost ledger, the sweep and reconciliation treat it like any other billed request. These
run on the records thread (`persistence.on_record_thread`); its final state is written by
`persistence.save_reading`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils import timezone

from .errors import ChatAppError
from .models import Generation, Message, SpeechAudio
from .speech_offer import SpeechSetup, speech_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from gateway_client.errors import ErrorInfo

__all__ = [
    "NoSuchAnswer",
    "ReadingEnd",
    "ReadingRefused",
    "ReadingStart",
    "beat",
    "create_reading",
    "newest_reading",
    "stored_audio",
]

SPEECH = Generation.Kind.SPEECH


class NoSuchAnswer(ChatAppError):
    """No answer of the user's has that key."""


class ReadingRefused(ChatAppError):
    """The answer cannot be read aloud (still being written, no text, no gateway that speaks)."""


@dataclass(frozen=True, slots=True)
class ReadingStart:
    """A new reading's row and what to send upstream."""

    generation_pk: int
    text: str
    setup: SpeechSetup


@dataclass(frozen=True, slots=True)
class ReadingEnd:
    """How a reading ended, for `persistence.save_reading`: the audio received (kept whatever
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


def stored_audio(user: User, message_pk: int) -> SpeechAudio | None:
    """The audio of the newest complete reading of the user's answer, to play again for free.
    An incomplete or stopped one is not reused: it would end early."""
    return (
        SpeechAudio.objects.filter(
            generation__read_aloud_id=message_pk,
            generation__user=user,
            generation__status=Generation.Status.COMPLETED,
        )
        .order_by("-generation_id")
        .first()
    )


def create_reading(user: User, message_pk: int) -> ReadingStart:
    """A `streaming` speech generation reading the user's finished answer `message_pk`."""
    message = _answer(user, message_pk)
    written = getattr(message, "generation", None)
    if written is None or written.is_running or not message.content.strip():
        raise ReadingRefused("Only a finished answer with text can be read aloud.")
    setup = speech_for(written.gateway_id)
    if setup is None:
        raise ReadingRefused("No gateway here can read answers aloud.")
    now = timezone.now()
    generation = Generation.objects.create(
        kind=SPEECH,
        read_aloud=message,
        conversation_id=message.conversation_id,
        gateway_id=setup.config.pk,
        model=setup.model[:200],
        dialect=setup.config.dialect or "numes",
        heartbeat_at=now,
    )
    return ReadingStart(generation.pk, message.content, setup)


def beat(generation_pk: int, upstream_id: str, request_id: str) -> None:
    """The reading is alive (the sweep leaves it alone), with the IDs known so far, so that a
    reading whose process died can still have its cost reconciled."""
    Generation.objects.filter(pk=generation_pk, status=Generation.Status.STREAMING).update(
        heartbeat_at=timezone.now(), upstream_id=upstream_id[:200], request_id=request_id[:200]
    )


def newest_reading(user: User, message_pk: int) -> Generation | None:
    """The user's newest reading of the answer `message_pk`, if any."""
    return (
        Generation.objects.filter(kind=SPEECH, read_aloud_id=message_pk, user=user)
        .order_by("-pk")
        .first()
    )
