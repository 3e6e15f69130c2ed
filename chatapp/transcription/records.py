"""A transcription's rows: the `Generation` it starts as, checked against the spending limits
first, and its heartbeat (which keeps every process's sweep off it while it runs).

A transcription is a `Generation` of kind `transcription` with `message=None` (the text it gives
goes to the message box, which the person may edit, send or drop), so the cost ledger, the sweep
and reconciliation treat it like any other billed request, as they do a read aloud. These run on
the records thread (`records_thread.on_record_thread`); its final state is written by
`persistence.save_transcription`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from chatapp.access import rate_limits
from chatapp.conversations.models import Conversation
from chatapp.costs import spending_limits
from chatapp.costs.models import Generation
from chatapp.errors import ChatAppError
from chatapp.transcription.offer import TranscriptionSetup, transcription_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User


__all__ = [
    "NO_GATEWAY",
    "TranscriptionRefused",
    "TranscriptionStart",
    "beat",
    "create_transcription",
]

TRANSCRIPTION = Generation.Kind.TRANSCRIPTION
NO_GATEWAY = "No gateway here can turn speech into text: an admin can choose a transcription model."


class TranscriptionRefused(ChatAppError):
    """No gateway transcribes, or a spending limit refuses it."""


@dataclass(frozen=True, slots=True)
class TranscriptionStart:
    """A new transcription's row and where to send the audio."""

    generation_pk: int
    setup: TranscriptionSetup
    user_pk: int


def _gateway_of(user: User, conversation_pk: int | None) -> tuple[Conversation | None, int | None]:
    """The user's conversation `conversation_pk` (None when not theirs, or none) and its gateway."""
    if conversation_pk is None:
        return None, None
    conversation = Conversation.objects.filter(pk=conversation_pk, user=user).first()
    return conversation, conversation.gateway_id if conversation is not None else None


def create_transcription(user: User, conversation_pk: int | None) -> TranscriptionStart:
    """A `streaming` transcription for the user, on the conversation's gateway when it
    transcribes (`offer.transcription_for`), counted with the answers the user starts
    (`rate_limits`) and reserved against the spending limits (`TranscriptionRefused` with the
    limit's words, after a refused, unbilled row is kept to say so)."""
    rate_limits.check_generation_start(user)
    conversation, gateway_pk = _gateway_of(user, conversation_pk)
    setup = transcription_for(gateway_pk)
    if setup is None:
        raise TranscriptionRefused(NO_GATEWAY)
    config = setup.config
    row = {
        "kind": TRANSCRIPTION,
        "user": user,
        "conversation": conversation,
        "gateway_id": config.pk,
        "model": setup.model[:200],
        "dialect": config.dialect or "",
    }
    ceiling = spending_limits.ceiling_for(
        config.pk, config.cost_unit, setup.model, [], None, TRANSCRIPTION
    )
    try:
        with transaction.atomic():
            spending_limits.reserve(user.pk, config.pk, ceiling, TRANSCRIPTION)
            generation = Generation.objects.create(**row, heartbeat_at=timezone.now())
    except spending_limits.SpendingLimitReached as exc:
        spending_limits.keep_refused(row, exc)
        raise TranscriptionRefused(str(exc)) from exc
    return TranscriptionStart(generation.pk, setup, user.pk)


def beat(generation_pk: int) -> None:
    """The transcription is alive: the sweep of another process leaves it alone."""
    Generation.objects.filter(pk=generation_pk, status=Generation.Status.STREAMING).update(
        heartbeat_at=timezone.now()
    )
