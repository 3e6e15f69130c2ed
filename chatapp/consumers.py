"""The page's one websocket, opened when the page loads: thin by design.

A tab keeps one socket for its whole life, opened before the user sends anything, so a new
conversation's first token needs no new page and no new socket: the page tells the socket which
conversation it shows (`{"t": "watch", "c": id}`, again whenever htmx swaps in another one). On
watch the consumer checks the user owns the conversation, joins its group (leaving the one watched
before) and asks the worker of every running generation there for a snapshot, which the worker
sends straight to this socket. After that it forwards the group's pre-encoded messages without
decoding them. From the browser it also accepts `{"t": "snapshot", "g": id}` (after a gap) and
`{"t": "stop", "g": id}`, for generations of conversations the user owns.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

import orjson
from channels.generic.websocket import AsyncWebsocketConsumer

from . import sweep, ws_protocol
from .models import Conversation, Generation

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    # Set by channels (typed here, since it ships no types): the ASGI scope, this socket's channel
    # and the configured layer.
    scope: dict[str, Any]
    channel_name: str
    channel_layer: ws_protocol.ChannelLayer

    user: User
    group: str | None = None

    async def connect(self) -> None:
        user: User | AnonymousUser | None = self.scope.get("user")  # from AuthMiddlewareStack
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        sweep.ensure_sweeper()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Forwarding is most of the traffic and touches no database: skip the base class's
        # `aclose_old_connections` thread hop for it (it ran once per delta per socket).
        if message["type"] == ws_protocol.FORWARD:
            await self.send(text_data=message["text"])
        else:
            await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = orjson.loads(text_data or "")
            kind = message["t"]
            if kind == "watch":
                await self._watch(int(message["c"]))
            elif kind in ("snapshot", "stop"):
                await self._generation_request(kind, int(message["g"]))
            else:
                raise KeyError(kind)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            logger.info("Ignoring a malformed websocket message: %.200r", text_data)

    async def _watch(self, conversation_pk: int) -> None:
        owned = await Conversation.objects.filter(pk=conversation_pk, user=self.user).aexists()
        if not owned:
            await self.send(text_data=orjson.dumps(ws_protocol.not_found(conversation_pk)).decode())
            return
        group = ws_protocol.group_name(conversation_pk)
        if group != self.group:
            if self.group is not None:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = group
            await self.channel_layer.group_add(group, self.channel_name)
        async for generation_pk, owner in Generation.objects.filter(
            conversation_id=conversation_pk, status=Generation.Status.STREAMING
        ).values_list("pk", "owner_channel"):
            if owner:
                request = ws_protocol.snapshot_request(generation_pk, self.channel_name)
                await self.channel_layer.send(owner, request)
        await self.send(text_data=orjson.dumps(ws_protocol.watching(conversation_pk)).decode())

    async def _generation_request(
        self, kind: Literal["snapshot", "stop"], generation_pk: int
    ) -> None:
        row = (
            await Generation.objects.filter(pk=generation_pk, conversation__user=self.user)
            .values_list("status", "owner_channel", "last_seq")
            .afirst()
        )
        if row is None:
            return
        status, owner, seq = row
        if status != Generation.Status.STREAMING:
            # Finished before this socket heard of it: tell the page to fetch the final render.
            done = ws_protocol.done(generation_pk, seq, Generation.Status(status))
            await self.send(text_data=orjson.dumps(done).decode())
        elif kind == "snapshot" and owner:
            request = ws_protocol.snapshot_request(generation_pk, self.channel_name)
            await self.channel_layer.send(owner, request)
        elif kind == "stop" and owner:
            await self.channel_layer.send(owner, ws_protocol.cancel(generation_pk))
