"""Stop: the one way the browser (a websocket message or the Stop button's POST) stops a turn.

Stop names the answer the page shows as running, but a turn that calls tools moves on to a new
generation after each round, so the page's may have just ended: Stop cancels whatever is still
being written in that answer's conversation (one answer is written per conversation at a time),
in whichever process runs it. A worker not yet running when its Stop arrives gets it when it
starts (`Ticker.add`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatapp.models import Generation
from chatapp.ws import protocol

if TYPE_CHECKING:
    from django.contrib.auth.models import User


async def stop_turn(user: User, generation_pk: int) -> bool:
    """Cancel the turn of `user`'s generation `generation_pk`; False if it is not theirs."""
    conversation_pk = (
        await Generation.objects.filter(pk=generation_pk, user=user)
        .values_list("conversation_id", flat=True)
        .afirst()
    )
    if conversation_pk is None:
        return False
    running = Generation.objects.filter(
        conversation_id=conversation_pk, status=Generation.Status.STREAMING
    ).exclude(kind=Generation.Kind.READ_ALOUD)  # a read aloud stops with its own player
    layer = protocol.channel_layer()
    async for pk, owner in running.values_list("pk", "owner_channel"):
        if owner:
            await layer.send(owner, protocol.cancel(pk))
    return True
