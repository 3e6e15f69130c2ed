"""The in-memory channel layer, made cheap enough for a few hundred streams in one process.

Channels' `InMemoryChannelLayer` scans every channel and group for expired entries on every
`group_send` and `receive`, and starts a task per recipient: with 200 streams and their sockets
that is O(channels) work on each of thousands of sends a second. Here the scan runs at most once a
second (expiry is a minute, so a second's delay changes nothing) and a group send puts to each
queue directly. Messages are still copied per recipient, as the base layer does, so a consumer
cannot change what another one receives. Semantics are otherwise the base layer's: at-most-once,
bounded queues, `ChannelFull` dropped for group sends. `group_send_now` is the same send as a
plain call, for the ticker (`socket_messages.immediate_group_send`).
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

from channels.layers import InMemoryChannelLayer

CLEAN_INTERVAL = 1.0


class LocalChannelLayer(InMemoryChannelLayer):  # type: ignore[misc]  # channels ships no types
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cleaned_at = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._cleaned_at >= CLEAN_INTERVAL:
            self._cleaned_at = now
            super()._clean_expired()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict[str, Any]) -> None:
        """`group_send` without awaiting: in process, putting to the queues cannot wait, so the
        ticker sends every stream's delta in one pass of the loop instead of one pass each."""
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        members = self.groups.get(group)
        if not members:
            return
        expires = time.time() + self.expiry
        for channel in list(members):
            queue = self.channels.get(channel)
            if queue is None:
                queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
            try:
                queue.put_nowait((expires, _copy(message)))
            except asyncio.QueueFull:
                continue  # at-most-once, like the base layer: the page recovers by snapshot


def _copy(message: dict[str, Any]) -> dict[str, Any]:
    """A flat message of strings and numbers (all of ours) needs only a shallow copy."""
    if all(type(value) in (str, int, float, bool) for value in message.values()):
        return dict(message)
    return deepcopy(message)
