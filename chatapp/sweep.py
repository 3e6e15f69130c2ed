"""Finds generations whose worker died, and costs nobody reconciled.

A worker beats (`heartbeat_at`) every second while it streams. After a restart, or when a process
dies, its generations stop beating: the sweep marks them `interrupted`, keeping the text flushed
so far, and tells open pages. It runs periodically on each server process (started lazily by the
first request or socket), and from `manage.py sweep_generations`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from gateway_client.errors import GatewayError

from . import persistence, worker, ws_protocol
from .gateway import shared_client
from .models import Generation

logger = logging.getLogger(__name__)

RECONCILE_MAX_ATTEMPTS = 3

_sweepers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}


async def sweep_stale_generations(stale_after: float | None = None) -> int:
    """Interrupt streaming generations not beating for `stale_after` seconds; how many."""
    stale = settings.CHAT_STALE_AFTER if stale_after is None else stale_after
    cutoff = timezone.now() - timedelta(seconds=stale)
    candidates = [
        pk
        async for pk in Generation.objects.filter(status=Generation.Status.STREAMING)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff))
        .values_list("pk", flat=True)
    ]
    alive = worker.running_pks()
    interrupted = await persistence.mark_interrupted([pk for pk in candidates if pk not in alive])
    layer = ws_protocol.channel_layer()
    for generation_pk, conversation_id, seq in interrupted:
        logger.warning("Generation %s interrupted (its worker stopped)", generation_pk)
        await layer.group_send(
            ws_protocol.group_name(conversation_id),
            ws_protocol.group_message(
                ws_protocol.done(generation_pk, seq, Generation.Status.INTERRUPTED)
            ),
        )
    return len(interrupted)


async def reconcile_pending() -> int:
    """Ask the gateway for costs still `pending` that no live worker is reconciling."""
    cutoff = timezone.now() - timedelta(seconds=60)
    pending = [
        g
        async for g in Generation.objects.filter(
            cost_source=Generation.CostSource.PENDING,
            finished_at__lt=cutoff,
            reconcile_attempts__lt=RECONCILE_MAX_ATTEMPTS,
        ).exclude(upstream_id="")[:20]
    ]
    if not pending:
        return 0
    done = 0
    gw = shared_client()
    for generation in pending:
        try:
            async with asyncio.timeout(20):
                record = await gw.get_generation(generation.upstream_id)
        except (GatewayError, TimeoutError) as exc:
            logger.info("No record for generation %s: %s", generation.upstream_id, exc)
            record = None
        if await persistence.save_reconciled(generation.pk, record):
            done += 1
    return done


async def _sweep_forever() -> None:
    while True:
        try:
            await sweep_stale_generations()
            await reconcile_pending()
        except asyncio.CancelledError:
            raise
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
