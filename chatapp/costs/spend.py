"""What a user sees of their own spend: a conversation's running total and this month's, per
unit (the admin's `summary` totals, scoped to the user's own generations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils import timezone

from chatapp.costs.summary import GroupTotals, totals
from chatapp.models import Conversation, Generation, LedgerDay

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def conversation_spend(conversation: Conversation) -> GroupTotals:
    """The conversation's generations still in the ledger (folded ones have no conversation)."""
    return totals(Generation.objects.filter(conversation=conversation))


def month_spend(user: User) -> GroupTotals:
    """Since the first of this month, UTC (the server's TIME_ZONE): the user's generations, by
    the user kept on each row (so deleting a conversation changes nothing), and those folded
    into daily totals (`ledger.fold`)."""
    start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return totals(
        Generation.objects.filter(user=user, started_at__gte=start),
        folded=LedgerDay.objects.filter(user=user, day__gte=start.date()),
    )
