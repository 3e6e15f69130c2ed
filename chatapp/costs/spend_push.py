"""The user's spend as the sidebar shows it (this month's, and what is left of each spending limit)
and the composer's warning at 80% of a limit, pushed to every tab of the user when one of their
costs settles: a page learns its new figures then, not at its next load.

Never per token: `costs.settling.settle` (every kind of generation, and the sweep) calls
`cost_settled` once a generation's cost is known, and the pushes are coalesced per user: at most
one is rendered every `PUSH_INTERVAL`, and it covers every cost settled before it starts. Rendered
once per settled cost, a crowd of answers ending together (200 at once) queued 200 renders of month
totals on one thread, behind which each later cost waited: a heavy user's tabs got figures seconds
late, and the renders took a fifth of the server's time. Each tab's socket joins its user's group
(`socket_messages.user_group_name`); the message carries the two partials rendered here, which the
page swaps in by their ids. The rendering reads the running totals (a few rows: `running_totals`),
on a thread of its own, one at a time: it never waits behind, or holds up, the records thread that
writes turns and final states.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import DatabaseError, close_old_connections
from django.template.loader import render_to_string

from chatapp.costs.spend import month_spend
from chatapp.costs.spending_limits import standings_for
from chatapp.messaging import layer_errors, socket_messages

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = ["cost_settled", "render_spend", "spend_context"]

logger = logging.getLogger(__name__)

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chat-spend")

PUSH_INTERVAL = 1.0  # seconds: one user's spend is rendered at most this often


@dataclass(slots=True)
class _Pushes:
    """One event loop's pushes: the one waiting to start per user (every cost settled before it
    starts rendering is in it), and when each user's last started."""

    waiting: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)

    def forget_older_than(self, when: float) -> None:
        """Drop the start times that no longer delay anything (bounded by recent users)."""
        for user_pk in [pk for pk, at in self.last.items() if at < when]:
            del self.last[user_pk]


_tasks: set[asyncio.Task[None]] = set()  # strong references: the loop keeps only weak ones
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pushes] = weakref.WeakKeyDictionary()


def spend_context(user: User, *, month: bool = True) -> dict[str, Any]:
    """What `_sidebar_spend.html` and `_limit_warning.html` show for `user` (`month`: with this
    month's spend, which only the sidebar shows)."""
    standings = standings_for(user)
    return {
        "month_spend": month_spend(user) if month else None,
        "spend_limits": standings,
        "limit_warnings": [state.warning() for state in standings if state.warn],
    }


def render_spend(user_pk: int) -> str | None:
    """The spend partials of `user_pk`, or None (a user since deleted)."""
    try:
        user = get_user_model().objects.filter(pk=user_pk).first()
        if user is None:
            return None
        context = spend_context(user)
        return render_to_string("chatapp/_sidebar_spend.html", context) + render_to_string(
            "chatapp/_limit_warning.html", context
        )
    finally:
        close_old_connections()  # this thread outlives any request: no connection past its age


async def cost_settled(user_pk: int) -> None:
    """Tell the tabs of `user_pk` their new spend: returns once a push rendered after this call
    has been sent (one push serves every call made while it waited). Never raises: the cost is
    saved, and a page that misses this shows it at its next load."""
    loop = asyncio.get_running_loop()
    pushes = _loops.get(loop)
    if pushes is None:
        pushes = _loops[loop] = _Pushes()
    push = pushes.waiting.get(user_pk)
    if push is None:
        push = pushes.waiting[user_pk] = loop.create_task(_push(pushes, user_pk))
        _tasks.add(push)
        push.add_done_callback(_tasks.discard)
    await asyncio.shield(push)


async def _push(pushes: _Pushes, user_pk: int) -> None:
    loop = asyncio.get_running_loop()
    wait = pushes.last.get(user_pk, -PUSH_INTERVAL) + PUSH_INTERVAL - loop.time()
    if wait > 0:
        await asyncio.sleep(wait)
    del pushes.waiting[user_pk]  # a cost settled from now on may be missed: a push of its own
    now = loop.time()
    pushes.forget_older_than(now - PUSH_INTERVAL)
    pushes.last[user_pk] = now
    try:
        html = await loop.run_in_executor(_executor, render_spend, user_pk)
        if html is None:
            return
        message = socket_messages.group_message(socket_messages.spend(html))
        await socket_messages.channel_layer().group_send(
            socket_messages.user_group_name(user_pk), message
        )
    except layer_errors.LAYER_DOWN as exc:
        logger.warning("User %s: their spend update was not sent (%s)", user_pk, exc)
    except DatabaseError as exc:  # the database is away: one line; the next settle or a reload
        logger.warning("User %s: their spend update was not read (%s)", user_pk, exc)
    except Exception:
        logger.exception("User %s: their spend update failed", user_pk)
