"""What a user sees of their own spend: a conversation's running total and this month's, per
unit (the admin's `summary` totals, scoped to the user's own generations).

A title still being written is left out: it has no amount yet rather than none, and it runs
right after every first answer, so counting it added "· 1 answer without an amount" to the
header for the moment it took, and moved the answer being read. Once it ends it counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.utils import timezone

from chatapp.costs.summary import GroupTotals, totals
from chatapp.models import Conversation, Generation, LedgerDay

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _shown() -> models.QuerySet[Generation]:
    return Generation.objects.exclude(
        kind=Generation.Kind.TITLE, status=Generation.Status.STREAMING
    )


def conversation_spend(conversation: Conversation) -> GroupTotals:
    """The conversation's generations still in the ledger (folded ones have no conversation)."""
    return totals(_shown().filter(conversation=conversation))


def month_spend(user: User) -> GroupTotals:
    """Since the first of this month, UTC (the server's TIME_ZONE): the user's generations, by
    the user kept on each row (so deleting a conversation changes nothing), and those folded
    into daily totals (`ledger.fold`)."""
    start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return totals(
        _shown().filter(user=user, started_at__gte=start),
        folded=LedgerDay.objects.filter(user=user, day__gte=start.date()),
    )
