"""Temporary chats: a conversation kept only while a page shows it.

A new chat started with "Temporary chat" on is flagged `temporary`: it is out of the sidebar and
of search, and its header says so. The sockets watching it are counted (`joined`, `left`); when
the last one leaves (its tab closed, or it went to another conversation) it is deleted
`CHAT_TEMPORARY_GRACE` seconds later unless a page shows it again meanwhile (a reload does), by
the one delete path (`deleting.py`), which stops its answer if one is still streaming and keeps
its generations, and so its costs, in the ledger. A new one counts as left from the start
(`StartedWith.row_values`) until a socket watches it. What a crashed process never counted down,
or a tab that closed before its socket watched, the periodic sweep deletes (`sweep_left_behind`):
a temporary chat left twice the grace ago, or idle for `CHAT_TEMPORARY_MAX_IDLE` (a count a
crash left too high).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from chatapp.conversations.deleting import delete_conversation
from chatapp.conversations.models import Conversation

logger = logging.getLogger(__name__)

_pending: set[asyncio.Task[None]] = set()  # deletions waiting out their grace (kept referenced)


def joined(conversation_pk: int) -> None:
    """A socket started watching the temporary chat `conversation_pk`. Database work."""
    Conversation.objects.filter(pk=conversation_pk, temporary=True).update(
        watchers=F("watchers") + 1, left_at=None
    )


def _left(conversation_pk: int) -> bool:
    """Count a watcher out; whether none is left."""
    with transaction.atomic():
        rows = Conversation.objects.filter(pk=conversation_pk, temporary=True)
        rows.update(watchers=F("watchers") - 1)
        return bool(rows.filter(watchers__lte=0).update(watchers=0, left_at=timezone.now()))


async def left(conversation_pk: int) -> None:
    """A socket stopped watching the temporary chat `conversation_pk`: when it was the last, its
    deletion waits out the grace period (in this process; the sweep does it otherwise)."""
    if not await sync_to_async(_left)(conversation_pk):
        return
    task = asyncio.get_running_loop().create_task(_delete_after_grace(conversation_pk))
    _pending.add(task)
    task.add_done_callback(_pending.discard)


def _gone_since(cutoff_seconds: float) -> Q:
    """Temporary chats no page has shown for `cutoff_seconds`, or idle for the maximum."""
    now = timezone.now()
    left = Q(watchers__lte=0, left_at__lte=now - timedelta(seconds=cutoff_seconds))
    idle = Q(updated_at__lt=now - timedelta(seconds=settings.CHAT_TEMPORARY_MAX_IDLE))
    return Q(temporary=True) & (left | idle)


async def _delete_after_grace(conversation_pk: int) -> None:
    try:
        await asyncio.sleep(settings.CHAT_TEMPORARY_GRACE)
        # A little early counts: the sleep and the clock are not the same timer.
        gone = _gone_since(settings.CHAT_TEMPORARY_GRACE - 0.5)
        conversation = await Conversation.objects.filter(gone, pk=conversation_pk).afirst()
        if conversation is not None:
            await delete_conversation(conversation)
            logger.info("Temporary chat %s deleted: no page shows it", conversation_pk)
    except asyncio.CancelledError:
        raise
    except Exception:  # the sweep deletes it later
        logger.exception("Deleting temporary chat %s failed", conversation_pk)


async def sweep_left_behind() -> int:
    """Delete the temporary chats no page has shown for twice the grace period, or idle for
    the maximum; how many."""
    gone = Conversation.objects.filter(_gone_since(2 * settings.CHAT_TEMPORARY_GRACE))
    count = 0
    async for conversation in gone.order_by("pk")[:100]:
        await delete_conversation(conversation)
        count += 1
    return count
