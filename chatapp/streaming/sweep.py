"""Finds generations whose worker died, costs nobody reconciled, and temporary chats left behind.

A worker beats (`heartbeat_at`) every second while it streams. After a restart, or when a process
dies, its generations stop beating: the sweep marks them `interrupted`, keeping the text flushed
so far, and tells open pages. It runs periodically on each server process (started lazily by the
first request or socket), and from `manage.py sweep_generations`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from chatapp.conversations import temporary
from chatapp.costs import settling
from chatapp.costs.costing import record_expected
from chatapp.costs.models import Generation
from chatapp.gateways.clients import shared_client
from chatapp.gateways.configs import GatewayUnavailable, config_for
from chatapp.messaging import socket_messages
from chatapp.streaming import persistence, titles, worker
from chatapp.tools.mcp import catalog as mcp_catalog

logger = logging.getLogger(__name__)


_sweepers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
_also_running: list[Callable[[], set[int]]] = []


def also_running(running_pks: Callable[[], set[int]]) -> None:
    """Leave alone the generations `running_pks()` says run in this process: for a package above
    this one that runs its own (`read_aloud.stream` tells it so as it is imported, before it can
    start one, so that a process that never imported it runs none of them either)."""
    _also_running.append(running_pks)


async def sweep_stale_generations(stale_after: float | None = None) -> int:
    """Interrupt streaming generations not beating for `stale_after` seconds; how many."""
    stale = settings.CHAT_STALE_AFTER if stale_after is None else stale_after
    cutoff = timezone.now() - timedelta(seconds=stale)
    candidates = [
        (pk, kind)
        async for pk, kind in Generation.objects.filter(status=Generation.Status.STREAMING)
        .filter(Generation.silent_since(cutoff))
        .values_list("pk", "kind")
    ]
    # A transcription beats every second while it runs (`transcription.requests`).
    alive = worker.running_pks() | titles.running_pks()
    alive = alive.union(*(running_pks() for running_pks in _also_running))
    # A read aloud, a title or a transcription has no answer of its own to keep or tell pages of.
    answerless = Generation.ANSWERLESS_KINDS
    others = [pk for pk, kind in candidates if kind in answerless and pk not in alive]
    answers = [pk for pk, kind in candidates if kind not in answerless and pk not in alive]
    stopped = await persistence.mark_answerless_interrupted(others) if others else 0
    interrupted = await persistence.mark_interrupted(answers)
    layer = socket_messages.channel_layer()
    for generation_pk, conversation_pk, seq in interrupted:
        logger.warning("Generation %s interrupted (its worker stopped)", generation_pk)
        if conversation_pk is None:  # deleted: no page shows it
            continue
        await layer.group_send(
            socket_messages.group_name(conversation_pk),
            socket_messages.group_message(
                socket_messages.done(generation_pk, seq, Generation.Status.INTERRUPTED)
            ),
        )
    return len(interrupted) + stopped


async def reconcile_pending(limit: int = 20) -> int:
    """Settle costs still `pending` that no live worker is settling; how many changed."""
    cutoff = timezone.now() - timedelta(seconds=60)
    pending = [
        g
        async for g in Generation.objects.filter(
            cost_source=Generation.CostSource.PENDING, finished_at__lt=cutoff
        ).order_by("finished_at")[:limit]
    ]
    done = 0
    for generation in pending:
        if await settle_one(generation):
            done += 1
    return done


async def settle_one(generation: Generation) -> bool:
    """One reconciliation round for `generation`; True when its cost changed."""
    try:
        config = await sync_to_async(config_for)(generation.gateway_id)
    except GatewayUnavailable:
        return False  # disabled since: its cost stays pending until it is enabled again
    final = settling.FinalState(
        upstream_id=generation.upstream_id,
        cost_pending=True,
        record_expected=record_expected(generation),
    )
    return await settling.settle(shared_client(config), generation.pk, generation.user_id, final)


async def _sweep_forever() -> None:
    while True:
        try:
            await sweep_stale_generations()
            await reconcile_pending()
            mcp_catalog.start_refresh_due()  # a task of its own: a slow server delays no sweep
            await temporary.sweep_left_behind()
        except asyncio.CancelledError:
            raise
        except DatabaseError as exc:
            # The database is away: say so in one line, and drop the connection it broke, which
            # no request's end would close here (this loop never ends), or every later sweep
            # fails on it too.
            logger.warning("Generation sweep failed; the next one retries (%s)", exc)
            await sync_to_async(close_old_connections)()
        except Exception:
            logger.exception("Generation sweep failed")
        await asyncio.sleep(settings.CHAT_SWEEP_INTERVAL)


def ensure_sweeper() -> None:
    """Start this loop's periodic sweep once (the first sweep runs at once: startup)."""
    if settings.CHAT_SWEEP_INTERVAL <= 0:
        return
    loop = asyncio.get_running_loop()
    task = _sweepers.get(loop)
    if task is None or task.done():
        _sweepers[loop] = loop.create_task(_sweep_forever(), context=contextvars.Context())
