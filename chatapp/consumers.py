"""The conversation websocket: thin by design (a consumer handles one event at a time).

On connect it checks the user owns the conversation, joins the conversation's group and asks the
worker of every running generation for a snapshot, which the worker sends straight to this
socket. After that it forwards the group's pre-encoded messages. From the browser it accepts
`{"t": "snapshot", "g": id}` (after a gap) and `{"t": "stop", "g": id}`.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from channels.generic.websocket import AsyncWebsocketConsumer

from . import sweep, ws_protocol
from .models import Conversation, Generation

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class ConversationConsumer(AsyncWebsocketConsumer):
    conversation_id: int
    group: str

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        owned = await Conversation.objects.filter(pk=self.conversation_id, user=user).aexists()
        if not owned:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        sweep.ensure_sweeper()
        self.group = ws_protocol.group_name(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        async for owner in Generation.objects.filter(
            conversation_id=self.conversation_id, status=Generation.Status.STREAMING
        ).values_list("owner_channel", flat=True):
            if owner:
                await self.channel_layer.send(
                    owner, ws_protocol.snapshot_request(self.channel_name)
                )

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            message = orjson.loads(text_data or "")
            kind, generation_pk = message["t"], int(message["g"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            logger.info("Ignoring a malformed websocket message: %.200r", text_data)
            return
        # Only generations of *this* conversation, which the user was checked to own.
        row = (
            await Generation.objects.filter(pk=generation_pk, conversation_id=self.conversation_id)
            .values_list("status", "owner_channel", "last_seq")
            .afirst()
        )
        if row is None:
            return
        status, owner, seq = row
        if status != Generation.Status.STREAMING:
            # Finished before this socket heard of it: tell the page to fetch the final render.
            done = ws_protocol.done(generation_pk, seq, status)
            await self.send(text_data=orjson.dumps(done).decode())
        elif kind == "snapshot" and owner:
            await self.channel_layer.send(owner, ws_protocol.snapshot_request(self.channel_name))
        elif kind == "stop" and owner:
            await self.channel_layer.send(owner, ws_protocol.cancel())

    async def chat_forward(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])
