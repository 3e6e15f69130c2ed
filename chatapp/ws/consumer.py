"""The page's one websocket, opened when the page loads: thin by design.

A tab keeps one socket for its whole life, opened before the user sends anything, so a new
conversation's first token needs no new page and no new socket: the page tells the socket which
conversation it shows (`{"t": "watch", "c": id}`, again whenever htmx swaps in another one). On
watch the consumer checks the user owns the conversation, joins its group (leaving the one watched
before) and asks the worker of every running generation there for a snapshot, which the worker
sends straight to this socket. After that it forwards the group's pre-encoded messages without
decoding them. From the browser it also accepts `{"t": "snapshot", "g": id}` (after a gap) and
`{"t": "stop", "g": id}`, for generations of conversations the user owns; another user's
conversation or generation is answered as one that does not exist (`gone`). What a browser may
send, and how much, is `message_limits.py`'s: a bad message gets an `error` and the socket stays
open; one that floods is closed with `message_limits.CLOSE_TOO_FAST`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Literal

import orjson
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.urls import reverse

from chatapp.conversations import temporary
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.messaging import layer_errors, socket_messages
from chatapp.streaming import stopping, sweep, worker
from chatapp.ws import message_limits, session_sockets

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_LAYER_DOWN = 4503  # the channel layer (Redis) failed: the page reconnects and re-syncs


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    # Set by channels (typed here, since it ships no types): the ASGI scope, this socket's channel
    # and the configured layer.
    scope: dict[str, Any]
    channel_name: str
    channel_layer: socket_messages.ChannelLayer

    user: User
    group: str | None = None
    temporary_pk: int | None = None  # the temporary chat watched, counted in (`temporary`)
    budget: message_limits.MessageBudget

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except layer_errors.LAYER_DOWN as exc:
            # Not a bug to log with its traceback (Daphne would, then close with 1011): this
            # socket's channel is gone with the layer's server; a new socket gets a new one.
            logger.warning("Closing a websocket: the channel layer failed (%s)", exc)
            await send({"type": "websocket.close", "code": CLOSE_LAYER_DOWN})

    async def connect(self) -> None:
        user: User | AnonymousUser | None = self.scope.get("user")  # from AuthMiddlewareStack
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        layer_errors.quiet_background_failures(asyncio.get_running_loop())
        self.budget = message_limits.MessageBudget(
            settings.CHAT_WS_MESSAGES_PER_SECOND, settings.CHAT_WS_BURST
        )
        sweep.ensure_sweeper()
        await self.accept()
        # Whatever the page shows, its spend follows the user's costs as they settle.
        await self.channel_layer.group_add(
            socket_messages.user_group_name(user.pk), self.channel_name
        )

    async def disconnect(self, code: int) -> None:
        if self.temporary_pk is not None:
            await temporary.left(self.temporary_pk)
            self.temporary_pk = None
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        user = getattr(self, "user", None)
        if user is not None:
            await self.channel_layer.group_discard(
                socket_messages.user_group_name(user.pk), self.channel_name
            )

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Forwarding is most of the traffic and touches no database: skip the base class's
        # `aclose_old_connections` thread hop for it (it ran once per delta per socket).
        if message["type"] == socket_messages.FORWARD:
            await self.send(text_data=message["text"])
        else:
            await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.budget.take(time.monotonic()):
            if self.budget.refused == 1:  # said once per flood, not once per message
                await self._error(message_limits.too_fast(self.budget.rate))
            elif self.budget.refused > self.budget.burst:
                logger.warning("Closing a websocket of %s: too many messages", self.user)
                await self.close(code=message_limits.CLOSE_TOO_FAST)
            return
        size = len(text_data if text_data is not None else bytes_data or b"")
        if size > settings.CHAT_WS_MAX_MESSAGE:
            await self._error(message_limits.too_large(settings.CHAT_WS_MAX_MESSAGE))
            return
        try:
            kind, pk = message_limits.parse_command(text_data)
        except message_limits.BadCommand as exc:
            logger.info("Refusing a websocket message (%s): %.200r", exc, text_data or bytes_data)
            await self._error(str(exc))
            return
        if kind == "watch":
            await self._watch(pk)
        else:
            await self._generation_request(kind, pk)

    async def _error(self, text: str) -> None:
        await self.send(text_data=orjson.dumps(socket_messages.error(text)).decode())

    async def session_check(self, message: session_sockets.CheckMessage) -> None:
        """The user signed out, changed password or was deactivated (`session_sockets`)."""
        ended = session_sockets.ends(message, self.scope["session"].session_key)
        if ended is False:
            return
        if ended or not await session_sockets.still_signed_in(self.scope, self.user.pk):
            logger.info("Closing a websocket of %s: its session ended", self.user)
            await self.close(code=session_sockets.CLOSE_SIGNED_OUT)

    def _may_watch(self, conversation_pk: int) -> tuple[bool, bool, bool]:
        """Whether the session still signs the user in, whether they own the conversation, and
        whether it is a temporary chat: one thread hop for all, as a watch took before the
        session was checked. A temporary chat newly watched by this socket counts it in."""
        signed_in = session_sockets.signed_in_as(self.scope, self.user.pk)
        found = (
            Conversation.objects.filter(pk=conversation_pk, user=self.user)
            .values_list("temporary", flat=True)
            .first()
        )
        if signed_in and found and self.temporary_pk != conversation_pk:
            temporary.joined(conversation_pk)
        return signed_in, found is not None, bool(found)

    async def _watch(self, conversation_pk: int) -> None:
        previous = self.temporary_pk
        signed_in, owned, is_temporary = await database_sync_to_async(self._may_watch)(
            conversation_pk
        )
        if signed_in and is_temporary:
            self.temporary_pk = conversation_pk
        elif previous != conversation_pk:
            self.temporary_pk = None
        if previous is not None and previous != conversation_pk:
            await temporary.left(previous)  # the page went on to another conversation
        if not signed_in:
            logger.info("Closing a websocket of %s on watch: its session ended", self.user)
            await self.close(code=session_sockets.CLOSE_SIGNED_OUT)
            return
        if not owned:
            await self.send(
                text_data=orjson.dumps(socket_messages.not_found(conversation_pk)).decode()
            )
            return
        group = socket_messages.group_name(conversation_pk)
        if group != self.group:
            if self.group is not None:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = group
            await self.channel_layer.group_add(group, self.channel_name)
        here = []
        async for generation_pk, owner in Generation.objects.filter(
            conversation_id=conversation_pk, status=Generation.Status.STREAMING
        ).values_list("pk", "owner_channel"):
            if worker.running_here(generation_pk, self.user.pk) is None:
                await self._snapshot(generation_pk, owner)  # asked of its process, answered later
            else:
                here.append(generation_pk)
        # `watching` comes before any snapshot, as when every snapshot came through the layer.
        await self.send(text_data=orjson.dumps(socket_messages.watching(conversation_pk)).decode())
        for generation_pk in here:
            await self._snapshot(generation_pk, None)

    async def _generation_request(
        self, kind: Literal["snapshot", "stop"], generation_pk: int
    ) -> None:
        if kind == "snapshot" and worker.running_here(generation_pk, self.user.pk) is not None:
            # From memory, with no query (at 200 streams, pages that saw a gap asked ~300 times).
            await self._snapshot(generation_pk, None)
            return
        row = (
            await Generation.objects.filter(pk=generation_pk, user=self.user)
            .values_list("status", "owner_channel", "last_seq", "message_id")
            .afirst()
        )
        if row is None:
            gone = socket_messages.generation_not_found(generation_pk)
            await self.send(text_data=orjson.dumps(gone).decode())
            return
        status, owner, seq, message_pk = row
        if kind == "stop":  # the turn: a tool round's next generation may have replaced this one
            await stopping.stop_turn(self.user, generation_pk)
        if status != Generation.Status.STREAMING:
            # Finished before this socket heard of it: tell the page to fetch the final render.
            next_url = await _next_round_url(message_pk)
            done = socket_messages.done(generation_pk, seq, Generation.Status(status), next_url)
            await self.send(text_data=orjson.dumps(done).decode())
        elif kind == "snapshot":
            await self._snapshot(generation_pk, owner)

    async def _snapshot(self, generation_pk: int, owner: str | None) -> None:
        """The running answer `generation_pk` so far, onto this socket: from memory when it runs
        in this process, else asked of the ticker of its `owner` process.

        From memory it goes straight onto the socket, and an ask its owner's channel has no room
        for is let go (the page asks again at its next gap): at 400 streams on Redis, both
        through the layer raised ChannelFull and closed the socket, and its tab reconnected
        into the same storm.
        """
        running = worker.running_here(generation_pk, self.user.pk)
        if running is not None:
            snapshot = await running.snapshot_message()
            await self.send(text_data=orjson.dumps(snapshot).decode())
        elif owner:
            request = socket_messages.snapshot_request(generation_pk, self.channel_name)
            try:
                await self.channel_layer.send(owner, request)
            except ChannelFull:
                logger.info("Generation %s: its process is behind on snapshots", generation_pk)


async def _next_round_url(message_pk: int | None) -> str | None:
    """The fragment URL of the tool round that continued the answer `message_pk`, if any: a page
    that missed the answer's `done` (its socket was down) learns of the round after it here."""
    if message_pk is None:
        return None
    rounds = Message.objects.filter(
        parent_id=message_pk, role=Message.Role.ASSISTANT, generation__tool_round__gt=1
    )
    pk = await rounds.order_by("-pk").values_list("pk", flat=True).afirst()
    return None if pk is None else reverse("chat:message", args=[pk])
