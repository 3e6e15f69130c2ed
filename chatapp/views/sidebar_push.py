"""Every tab of a user hears that their sidebar changed (pinned, filed, archived, several deleted
or imported in another tab) as `{"t": "sidebar"}` on its socket, and fetches its own
(`views.organising.sidebar`): the push carries no markup, since each tab's sidebar marks its own
conversation on screen.

Never raises: the change is saved, and a tab that misses the push shows it at its next load.
Deleting one conversation from its menu pushes nothing, as before: a tab with a stale link to it
gets the 404 page that says it is gone (`test_page_details`).
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync

from chatapp.messaging import layer_errors, socket_messages

__all__ = ["atell", "tell"]

logger = logging.getLogger(__name__)


async def atell(user_pk: int) -> None:
    message = socket_messages.group_message(socket_messages.sidebar_changed())
    try:
        await socket_messages.channel_layer().group_send(
            socket_messages.user_group_name(user_pk), message
        )
    except layer_errors.LAYER_DOWN as exc:
        logger.warning("User %s: their sidebar change was not sent (%s)", user_pk, exc)


def tell(user_pk: int) -> None:
    """`atell` from a sync view (its own thread, so the event loop is not held)."""
    async_to_sync(atell)(user_pk)
