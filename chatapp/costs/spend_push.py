"""The user's spend as the sidebar shows it (this month's, and what is left of each spending
limit) and the composer's warning at 80% of a limit, pushed to every tab of the user when one
of their costs settles: a page learns its new figures then, not at its next load.

One message per settled cost, never per token: the worker (and a read aloud, and the sweep) call
`cost_settled` once a generation's cost is known. Each tab's socket joins its user's group
(`protocol.user_group_name`); the message carries the two partials rendered here, which the
page swaps in by their ids. The rendering queries span all the user's generations of the
month, so it runs on a thread of its own, one at a time: it never waits behind, or holds up,
the records thread that writes turns and final states.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import close_old_connections
from django.template.loader import render_to_string

from chatapp.costs.spend import month_spend
from chatapp.costs.spending_limits import standings_for
from chatapp.models import Generation
from chatapp.ws import layer_errors, protocol

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = ["cost_settled", "render_spend", "spend_context"]

logger = logging.getLogger(__name__)

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chat-spend")


def spend_context(user: User, *, month: bool = True) -> dict[str, Any]:
    """What `_sidebar_spend.html` and `_limit_warning.html` show for `user` (`month`: with this
    month's spend, which only the sidebar shows)."""
    standings = standings_for(user)
    return {
        "month_spend": month_spend(user) if month else None,
        "spend_limits": standings,
        "limit_warnings": [state.warning() for state in standings if state.warn],
    }


def render_spend(generation_pk: int) -> tuple[int, str] | None:
    """The owner of `generation_pk` and their spend partials, or None (a user since deleted)."""
    try:
        user_pk = (
            Generation.objects.filter(pk=generation_pk).values_list("user_id", flat=True).first()
        )
        user = None if user_pk is None else get_user_model().objects.filter(pk=user_pk).first()
        if user is None:
            return None
        context = spend_context(user)
        html = render_to_string("chatapp/_sidebar_spend.html", context) + render_to_string(
            "chatapp/_limit_warning.html", context
        )
        return user.pk, html
    finally:
        close_old_connections()  # this thread outlives any request: no connection past its age


async def cost_settled(generation_pk: int) -> None:
    """Tell the tabs of `generation_pk`'s user their new spend. Never raises: the cost is saved,
    and a page that misses this shows it at its next load."""
    try:
        loop = asyncio.get_running_loop()
        rendered = await loop.run_in_executor(_executor, render_spend, generation_pk)
        if rendered is None:
            return
        user_pk, html = rendered
        message = protocol.group_message(protocol.spend(html))
        await protocol.channel_layer().group_send(protocol.user_group_name(user_pk), message)
    except layer_errors.LAYER_DOWN as exc:
        logger.warning("Generation %s: its spend update was not sent (%s)", generation_pk, exc)
    except Exception:
        logger.exception("Generation %s: its spend update failed", generation_pk)
