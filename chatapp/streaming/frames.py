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
across frames or held for a later tick: what a tick takes goes out in that tick. A frame carries
at most `socket_messages.MAX_FRAME_TEXT` characters of text and HTML (a delta holds no more
text, nor HTML beside text: `delta_frames`): a conversation whose tick took more gets several
frames, in order.
"""

from __future__ import annotations

import orjson

from chatapp.messaging import socket_messages


class TickFrames:
    """The deltas one tick took, by conversation group, in the order they were taken, in frames
    of at most `MAX_FRAME_TEXT` characters of text."""

    __slots__ = ("_by_group",)

    def __init__(self) -> None:
        # Per group: its frames (each a list of deltas) and the text in the last one.
        self._by_group: dict[str, tuple[list[list[list[object]]], list[int]]] = {}

    def add(self, group: str, delta: list[object]) -> None:
        """`delta` (`socket_messages.delta`) for the sockets of `group`."""
        size = _text_size(delta)
        found = self._by_group.get(group)
        if found is None:
            self._by_group[group] = ([[delta]], [size])
            return
        frames, last_size = found
        if last_size[0] + size > socket_messages.MAX_FRAME_TEXT:
            frames.append([delta])
            last_size[0] = size
        else:
            frames[-1].append(delta)
            last_size[0] += size

    def messages(self) -> list[tuple[str, socket_messages.ForwardMessage]]:
        """Each group's channel-layer messages (one unless its text outgrew a frame), each frame
        encoded once."""
        return [
            (group, frame(deltas))
            for group, (frames, _) in self._by_group.items()
            for deltas in frames
        ]


def _text_size(delta: list[object]) -> int:
    """The characters of text (content and reasoning, `[g, n, content, reasoning?, extras?]`)
    and of the HTML in its extras (a settled chunk, a draft)."""
    size = sum(len(part) for part in delta[2:4] if isinstance(part, str))
    extras = delta[4] if len(delta) > 4 else None
    return size + (socket_messages.html_size(extras) if isinstance(extras, dict) else 0)


def frame(deltas: list[list[object]]) -> socket_messages.ForwardMessage:
    """The frame for `deltas` (one or more, in order) as a channel-layer message."""
    payload: object = deltas[0] if len(deltas) == 1 else deltas
    return {"type": socket_messages.FORWARD, "text": orjson.dumps(payload).decode()}
