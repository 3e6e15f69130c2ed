"""Settling costs the stream did not report: ask the gateway's record where it keeps one, then
let `costing` decide. Used by the worker right after a stream, by the sweep for what a worker
could not finish, and by `manage.py reconcile_costs`."""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from chatapp.costs.costing import Lookup
from gateway_client import GatewayClient
from gateway_client.errors import GatewayError, StatusError

logger = logging.getLogger(__name__)

# `get_generation` itself retries a missing or `in_progress` record for ~15 s.
LOOKUP_TIMEOUT = 30.0


async def look_up(gw: GatewayClient, upstream_id: str, *, expected: bool) -> Lookup:
    """The gateway's record of `upstream_id`, when it is `expected` to keep one."""
    if not expected or not upstream_id:
        return Lookup(expected=False)
    try:
        async with asyncio.timeout(LOOKUP_TIMEOUT):
            record = await gw.get_generation(
                upstream_id, first_wait=settings.CHAT_RECORD_FIRST_WAIT
            )
            return Lookup(record)
    except StatusError as exc:
        # Not found (yet) or refused: the gateway answered; a later round may find it.
        logger.info("No generation record for %s yet: %s", upstream_id, exc)
        return Lookup()
    except (GatewayError, TimeoutError) as exc:
        logger.info("Could not reach the gateway for %s: %s", upstream_id, exc)
        return Lookup(reached=False)
