"""Deleting a conversation: its answers still streaming are stopped first (in whatever process
runs them), then its rows go. Its generations stay: they are the cost ledger, and lose only their
link to it (`Generation.conversation` is SET_NULL)."""

from __future__ import annotations

from chatapp.conversations.models import Conversation
from chatapp.costs.models import Generation
from chatapp.messaging import socket_messages


async def delete_conversation(conversation: Conversation) -> None:
    layer = socket_messages.channel_layer()
    async for generation_pk, owner in Generation.objects.filter(
        conversation=conversation, status=Generation.Status.STREAMING
    ).values_list("pk", "owner_channel"):
        if owner:
            await layer.send(owner, socket_messages.cancel(generation_pk))
    await conversation.adelete()
