"""A deactivated account's answers stop at once.

Its sockets close by `chatapp.ws.session_sockets` (its sessions no longer sign anyone in); this
stops what they had started: every generation of the user still streaming is cancelled in
whichever process runs it, exactly as Stop cancels one (`streaming.stopping.cancel`: the worker
closes the upstream request, so the gateway stops too). Run after the change commits, so that a
worker reading the account sees it inactive.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction

from chatapp.costs.models import Generation
from chatapp.messaging import layer_errors
from chatapp.streaming import stopping

logger = logging.getLogger(__name__)

_pending: set[asyncio.Task[int]] = set()


async def stop_all(user_pk: int) -> int:
    """Cancel every streaming generation of the user; how many were asked to stop."""
    running = [
        (pk, owner)
        async for pk, owner in Generation.objects.filter(
            user_id=user_pk, status=Generation.Status.STREAMING
        ).values_list("pk", "owner_channel")
    ]
    try:
        await stopping.cancel(running)
    except layer_errors.LAYER_DOWN as exc:  # the sweep ends them when their heartbeat stops
        logger.warning("Could not stop the answers of deactivated user %s: %s", user_pk, exc)
    return len(running)


def _stop_later(user_pk: int) -> None:
    def run() -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a sync view's thread (the admin), a management command
            async_to_sync(stop_all)(user_pk)
            return
        task = loop.create_task(stop_all(user_pk))
        _pending.add(task)
        task.add_done_callback(_pending.discard)

    transaction.on_commit(run)


def user_saved(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and "is_active" not in update_fields:
        return
    if not instance.is_active:
        _stop_later(instance.pk)
