"""One websocket frame per watching socket per tick: every answer's delta of the tick, coalesced.

A socket watches one conversation (its group), so the ticker gathers the deltas it takes in one
pass (`Ticker._tick_forever`) by conversation and sends each conversation one channel-layer
message, which its consumers forward as one frame. A comparison's answers, or a tool round's
next one beside the last, then cost their sockets one frame a tick, not one each: the frame, the
channel-layer copy per socket, the consumer's send, Daphne's and autobahn's framing, the deflate
flush and the write are per frame, whatever it carries.

A frame of one delta stays the bare delta (`[g, n, ...]`, `socket_messages`); several travel as
a list of them, `[[g, n, ...], [g, n, ...]]`, each applied in order by the page
(`stream_state.js` `messagesFromWire`, `page_model.messages_from_wire`). A delta is never split
across frames or held for a later tick: what a tick takes goes out in that tick.
"""

from __future__ import annotations

import orjson

from chatapp.ws import socket_messages


class TickFrames:
    """The deltas one tick took, by conversation group, in the order they were taken."""

    __slots__ = ("_by_group",)

    def __init__(self) -> None:
        self._by_group: dict[str, list[list[object]]] = {}

    def add(self, group: str, delta: list[object]) -> None:
        """`delta` (`socket_messages.delta`) for the sockets of `group`."""
        found = self._by_group.get(group)
        if found is None:
            self._by_group[group] = [delta]
        else:
            found.append(delta)

    def messages(self) -> list[tuple[str, socket_messages.ForwardMessage]]:
        """Each group's one channel-layer message, its frame encoded once."""
        return [(group, frame(deltas)) for group, deltas in self._by_group.items()]


def frame(deltas: list[list[object]]) -> socket_messages.ForwardMessage:
    """The frame for `deltas` (one or more, in order) as a channel-layer message."""
    payload: object = deltas[0] if len(deltas) == 1 else deltas
    return {"type": socket_messages.FORWARD, "text": orjson.dumps(payload).decode()}
