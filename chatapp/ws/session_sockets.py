"""A websocket lives no longer than the session it was opened in.

A socket is authenticated once, at its handshake; after that, signing out, a password change or
an account turned inactive (or deleted) ends the session for HTTP, and must end it for the socket
too. Each of those sends `session.check` to the user's group (`socket_messages.user_group_name`,
which every socket of the user joins, in every process), after the change is committed:

- a sign-out names the session it ends (by digest: the key itself is a credential and the
  message may cross Redis); the sockets opened in that session close, the user's others stay;
- any other change to the user: each socket asks Django, as a request would
  (`django.contrib.auth.get_user` on a fresh read of its session), whether its session still
  signs in this user (active, the password's session hash still matching); those that do not
  close.

The channel layer is at-most-once, so a check can be lost: `watch` asks the same question on
every call, and a socket whose session ended is closed there at the latest.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from importlib import import_module
from types import SimpleNamespace
from typing import Any, TypedDict

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.http import HttpRequest

from chatapp.messaging import layer_errors, socket_messages

logger = logging.getLogger(__name__)

CHECK = "session.check"  # the channel-layer message type: ChatConsumer.session_check
CLOSE_SIGNED_OUT = 4401  # as a socket refused for want of a session

_pending: set[asyncio.Task[None]] = set()  # sends scheduled from async code, until they finish


class CheckMessage(TypedDict, total=False):
    type: str
    ended: str  # the digest of the session a sign-out ended


def digest(session_key: str) -> str:
    return hashlib.sha256(session_key.encode()).hexdigest()


def ends(message: CheckMessage, session_key: str | None) -> bool | None:
    """True: this message ends the session `session_key`; False: it ends another one (a
    sign-out elsewhere, nothing to check); None: check the session."""
    if "ended" not in message:
        return None
    return session_key is not None and message["ended"] == digest(session_key)


async def still_signed_in(scope: dict[str, Any], user_pk: int) -> bool:
    """Whether the socket's session still signs in the user it was opened for, read afresh."""
    signed_in: bool = await database_sync_to_async(signed_in_as)(scope, user_pk)
    return signed_in


def signed_in_as(scope: dict[str, Any], user_pk: int) -> bool:
    """`still_signed_in`, for a caller already on a thread that may query the database."""
    session = scope.get("session")
    session_key = None if session is None else session.session_key
    if session_key is None:
        return False
    engine = import_module(settings.SESSION_ENGINE)
    request = SimpleNamespace(session=engine.SessionStore(session_key))
    user = auth.get_user(request)  # type: ignore[arg-type]  # it reads only `.session`
    return bool(user.is_authenticated and user.pk == user_pk)


def check_sockets(user_pk: int, ended_session: str | None = None) -> None:
    """Have every socket of the user check its session, once the current transaction commits."""
    message: CheckMessage = {"type": CHECK}
    if ended_session is not None:
        message["ended"] = digest(ended_session)
    group = socket_messages.user_group_name(user_pk)
    transaction.on_commit(lambda: _send(group, message))


def _send(group: str, message: CheckMessage) -> None:
    async def send() -> None:
        try:
            await get_channel_layer().group_send(group, dict(message))
        except layer_errors.LAYER_DOWN as exc:  # the check on `watch` still holds
            logger.warning(
                "Could not tell the sockets of %s to check their session: %s", group, exc
            )

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a sync view's thread, a management command
        async_to_sync(send)()
        return
    task = loop.create_task(send())
    _pending.add(task)
    task.add_done_callback(_pending.discard)


def _signed_out(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    if user is not None and request.session.session_key is not None:
        check_sockets(user.pk, ended_session=request.session.session_key)


def _user_saved(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    if update_fields is not None and set(update_fields) <= {"last_login"}:
        return  # a sign-in, not a change to the account
    check_sockets(instance.pk)


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    check_sockets(instance.pk)


def connect_signals() -> None:
    user_model = auth.get_user_model()
    user_logged_out.connect(_signed_out, dispatch_uid="chatapp.ws.session_sockets.signed_out")
    post_save.connect(
        _user_saved, sender=user_model, dispatch_uid="chatapp.ws.session_sockets.saved"
    )
    post_delete.connect(
        _user_deleted, sender=user_model, dispatch_uid="chatapp.ws.session_sockets.deleted"
    )
