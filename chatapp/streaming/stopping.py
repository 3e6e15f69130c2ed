"""Stop: the one way the browser (a websocket message or the Stop button's POST) stops a turn.

Stop names the answer the page shows as running, but a turn that calls tools moves on to a new
generation after each round, so the page's may have just ended: Stop cancels whatever is still
being written at or below that answer in its conversation's message tree (the turn's later
rounds), in whichever process runs it, and nothing beside it (the other answers of a comparison
go on). A worker not yet running when its Stop arrives gets it when it starts (`Ticker.add`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from chatapp.conversations.models import Message
from chatapp.costs.models import Generation
from chatapp.messaging import socket_messages

if TYPE_CHECKING:
    from django.contrib.auth.models import User


async def stop_turn(user: User, generation_pk: int) -> bool:
    """Cancel the turn of `user`'s generation `generation_pk`; False if it is not theirs."""
    found = (
        await Generation.objects.filter(pk=generation_pk, user=user)
        .values_list("conversation_id", "message_id")
        .afirst()
    )
    if found is None:
        return False
    conversation_pk, message_pk = found
    running = Generation.objects.filter(
        conversation_id=conversation_pk, status=Generation.Status.STREAMING
    ).exclude(kind=Generation.Kind.READ_ALOUD)  # a read aloud stops with its own player
    candidates = [
        (pk, owner, at)
        async for pk, owner, at in running.values_list("pk", "owner_channel", "message_id")
    ]
    if any(at != message_pk for _, _, at in candidates):
        parents = {
            pk: parent
            async for pk, parent in Message.objects.filter(
                conversation_id=conversation_pk
            ).values_list("pk", "parent_id")
        }
        candidates = [c for c in candidates if _below(parents, c[2], message_pk)]
    await cancel((pk, owner) for pk, owner, _ in candidates)
    return True


def _below(parents: Mapping[int, int | None], pk: int | None, ancestor: int) -> bool:
    """Whether the message `pk` is `ancestor` or under it."""
    while pk is not None:
        if pk == ancestor:
            return True
        pk = parents.get(pk)
    return False


async def cancel(generations: Iterable[tuple[int, str]]) -> None:
    """Tell each `(generation pk, owner channel)` to stop, in whichever process runs it."""
    layer = socket_messages.channel_layer()
    for pk, owner in generations:
        if owner:
            await layer.send(owner, socket_messages.cancel(pk))
