"""The messages that travel between workers, consumers and browsers.

Browser-bound payloads are encoded once by the sender and carried as text in a channel-layer
message of type `chat.forward`, so a consumer forwards them without decoding or re-encoding
(it is thin on purpose). `g` is the generation's database key (never the gateway's generation ID).

- `[g, n, content, reasoning?, extras?]`: delta `n`, what arrived since delta `n - 1`. Deltas are
  most of the traffic, so they are a bare JSON array: ~12 bytes of envelope around the text instead
  of ~40 for an object. A delta's text is at most `MAX_FRAME_TEXT` characters: a longer one (a
  gateway's one huge chunk) goes as several deltas, numbered one after another, with the extras in
  the last (`delta_frames`). Trailing empty parts are left out; `extras` is an object with any of
  `tool_calls`, `tool_runs`, `annotations`, `attachments` (`attachments` names kinds only:
  `image`, `file`, `audio`; the media themselves come with the final render), `settled` and
  `draft`.
- `[[g, n, ...], [g, n, ...]]`: several deltas in one frame, of the answers of the watched
  conversation that had text in the same tick (`streaming/frames.py`), applied in order.
- `tool_runs`: the runs of the answer's tool calls that began or ended since the last delta, each
  `{"index", "id", "status", "pretty", "valid", "result", "duration_ms"}` (`tool_loop.CallRun`);
  a snapshot carries all of them.
- `previews`: an image generation's pictures that changed since the last delta, each
  `[index, data_url, partial]`, only the newest per image index (`partial`: a progress preview,
  else the final while it is small enough); the browser shows each in place of the one before
  for its index. A checked raster `data:` URL (`image_checks.py`); a snapshot carries the newest
  of every index.
- `settled`: `[start, end, html]` or `[start, end, html, join, split]`, the sanitized HTML of the
  answer's content from UTF-16 offset `start` to `end`, sent once when it settles
  (`live_blocks.py`); the browser shows the content after `end` as text. A delta's `start` is the
  previous `end`. With `join` (the open block's tag: `ul`, `ol`, `blockquote`, `p`, `table`,
  `tbody`; or `=`), the first `split` UTF-16 units of `html` go into the element of the block
  still open (list items, table rows and lines settle on their own), or replace it (`=`: the
  block turned out to be another, a loose list or a setext heading); the rest follows it.
- `draft`: `[start, end, html]` or `[start, end, html, join, split]` like `settled`, but not
  settled: the content from `start` (where the settled part ends) to `end` rendered as it would
  settle if the answer ended now (`live_blocks.BlockSettler.take_draft`), so that a line being
  written shows formatted rather than as raw markdown. The browser shows it in place of that
  text, and the text after `end` as text; the next `settled` or `draft` replaces it, and
  `"draft": null` withdraws it (the tail turned out to open a fence). Sent at most every 150 ms
  per answer, only when the unsettled text holds markup.
- `{"t": "snapshot", "g": id, "seq": n, "content", "reasoning", "tool_calls", ..., "settled",
  "draft"?}`: everything up to and including delta `n` (`settled` starts at 0).
- `{"t": "done", "g": id, "seq": n, "status", "next"?}`: terminal; the browser fetches the final
  render. `next`, when the answer's tool calls ran and the turn goes on, is the fragment URL of
  the next round's answer, which the browser puts after this one.
- `{"t": "updated", "g": id}`: the record changed (cost reconciled); refetch the render.
- `{"t": "spend", "html": text}`: to every socket of the user (their group), when one of their
  costs settled: the sidebar's spend and the composer's limit warning, rendered, each an element
  the page swaps for the one with its id (`spend_push.py`).
- `{"t": "sidebar"}`: to every socket of the user, when their conversations were pinned, filed,
  archived or deleted (`views/sidebar_push.py`): the page fetches its sidebar again.
- `{"t": "watching", "c": id}`: the answer to a watch: the socket now gets the conversation's
  messages, and snapshots of its running answers are on their way.
- `{"t": "gone", "c": id}`: the conversation the page asked to watch is not there (or not the
  user's); `{"t": "gone", "g": id}` likewise for a generation asked for a snapshot or a stop.
- `{"t": "error", "error": text}`: the browser's last message was refused (malformed, too large,
  too many; see `message_limits.py`), in words.

From the browser (see `consumer.py`): `{"t": "watch", "c": id}`, `{"t": "snapshot", "g": id}`,
`{"t": "stop", "g": id}`.

Worker-bound messages go to the channel of the process running the generation
(`Generation.owner_channel`), with the generation as `g`: `generation.cancel`, and
`generation.snapshot` with `reply_to` (a consumer's channel name).

Channels ships no types, so `ChannelLayer` says what we use of a layer and what we send on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypedDict, cast

import orjson
from channels.layers import get_channel_layer

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway_client.errors import Phase

FORWARD: Final = "chat.forward"
CANCEL: Final = "generation.cancel"
SNAPSHOT_REQUEST: Final = "generation.snapshot"


class ForwardMessage(TypedDict):
    """A browser-bound payload, encoded once: a consumer sends `text` as it is."""

    type: Literal["chat.forward"]
    text: str


class CancelMessage(TypedDict):
    type: Literal["generation.cancel"]
    g: int


class SnapshotRequestMessage(TypedDict):
    type: Literal["generation.snapshot"]
    g: int
    reply_to: str


type LayerMessage = ForwardMessage | CancelMessage | SnapshotRequestMessage


class ChannelLayer(Protocol):
    async def new_channel(self, prefix: str = ...) -> str: ...
    async def send(self, channel: str, message: LayerMessage) -> None: ...
    # What arrives is whatever was sent (decoded by the layer, for Redis): checked by the reader.
    async def receive(self, channel: str) -> dict[str, Any]: ...
    async def group_add(self, group: str, channel: str) -> None: ...
    async def group_discard(self, group: str, channel: str) -> None: ...
    async def group_send(self, group: str, message: ForwardMessage) -> None: ...


def immediate_group_send(layer: ChannelLayer) -> Callable[[str, ForwardMessage], None] | None:
    """The layer's group send as a plain call, when it can send without waiting (the in-process
    layer's `group_send_now`); None for a layer with a network behind it (Redis)."""
    send: Callable[[str, ForwardMessage], None] | None = getattr(layer, "group_send_now", None)
    return send


def channel_layer() -> ChannelLayer:
    """The configured layer (`CHANNEL_LAYERS["default"]`)."""
    return cast("ChannelLayer", get_channel_layer())  # channels' layers are untyped


def group_name(conversation_pk: int) -> str:
    return f"conversation.{conversation_pk}"


def user_group_name(user_pk: int) -> str:
    """Every socket of one user, whatever its page shows (`spend`)."""
    return f"user.{user_pk}"


def group_message(payload: dict[str, object] | list[object]) -> ForwardMessage:
    return {"type": FORWARD, "text": orjson.dumps(payload).decode()}


def delta(generation_pk: int, fields: dict[str, object]) -> list[object]:
    """The compact delta for `fields` (a `LiveState.take_delta()` result, `seq` included)."""
    payload: list[object] = [
        generation_pk,
        fields["seq"],
        fields.get("content", ""),
        fields.get("reasoning", ""),
    ]
    extras = {key: fields[key] for key in _EXTRAS if key in fields}
    if extras:
        payload.append(extras)
    elif not payload[3]:
        del payload[3]
    return payload


# Characters of text (content and reasoning together) in one delta sent to browsers: a gateway
# may send a whole answer in one chunk, which would reach every watching browser as one frame of
# that size. ~16 KB is hundreds of tokens, more than a tick at any real token rate takes. The
# HTML of a settled chunk or a draft is at most as long (`live_blocks`), and counts as text here.
MAX_FRAME_TEXT = 16_384
# Characters of a settled chunk's HTML (`live_blocks`), sent once: highlighted code's HTML is 3-5
# times its source, so a bound of a frame's text would show every code block of more than about
# 3,000 characters as plain text while it streams; this one, a few hundred lines of code.
MAX_SETTLED_HTML = 4 * MAX_FRAME_TEXT


def frame_count(fields: dict[str, object]) -> int:
    """How many deltas `fields` (text and extras, not yet numbered) go to browsers as: the
    numbers `LiveState` gives them."""
    text = sum(
        len(value) for key in ("content", "reasoning") if isinstance(value := fields.get(key), str)
    )
    count = max(1, -(-text // MAX_FRAME_TEXT))
    last = text - (count - 1) * MAX_FRAME_TEXT  # the text in the last frame
    return count + (last > 0 and last + html_size(fields) > MAX_FRAME_TEXT)


def html_size(fields: dict[str, object]) -> int:
    """The characters of HTML in a delta's settled chunk and draft (`[start, end, html, ...]`)."""
    chunks = (fields.get("settled"), fields.get("draft"))
    return sum(len(c[2]) for c in chunks if isinstance(c, list) and isinstance(c[2], str))


def delta_frames(generation_pk: int, fields: dict[str, object]) -> list[list[object]]:
    """`delta` in `frame_count(fields)` frames numbered up to `fields["seq"]`, each holding at
    most `MAX_FRAME_TEXT` characters of its text, in order (the reasoning, then the content);
    the extras go with the last, after all the text they may refer to (a settled block's end),
    or in a frame of their own when their HTML would not fit beside its text."""
    parts: list[dict[str, object]] = [{}]
    room = MAX_FRAME_TEXT
    for key in ("reasoning", "content"):
        text = fields.get(key)
        while isinstance(text, str) and text:
            if not room:
                parts.append({})
                room = MAX_FRAME_TEXT
            part, text = text[:room], text[room:]
            parts[-1][key] = part
            room -= len(part)
    if room < MAX_FRAME_TEXT and html_size(fields) > room:
        parts.append({})
    extras = {key: value for key, value in fields.items() if key not in ("content", "reasoning")}
    parts[-1].update(extras)
    last = fields["seq"]
    assert isinstance(last, int)
    first = last - len(parts) + 1
    return [delta(generation_pk, {**part, "seq": first + n}) for n, part in enumerate(parts)]


_EXTRAS = ("tool_calls", "tool_runs", "annotations", "attachments", "settled", "draft", "previews")


def decode_frame(text: str | bytes) -> list[dict[str, Any]]:
    """A frame's messages, each as `decode` gives it: one, or a tick's deltas (`frames.py`)."""
    payload = orjson.loads(text)
    if isinstance(payload, list) and payload and isinstance(payload[0], list):
        return [_decoded(delta) for delta in payload]
    return [_decoded(payload)]


def decode(text: str | bytes) -> dict[str, Any]:
    """A browser-bound message as an object, a compact delta included (`{"t": "delta", ...}` with
    the parts it carries): what chat.js makes of it, for Python readers (tests, benchmarks)."""
    return _decoded(orjson.loads(text))


def _decoded(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, list):
        return dict(payload)
    message: dict[str, Any] = {"t": "delta", "g": payload[0], "seq": payload[1]}
    for key, value in zip(("content", "reasoning"), payload[2:4], strict=False):
        if value:
            message[key] = value
    if len(payload) > 4:
        message.update(payload[4])
    return message


def snapshot(generation_pk: int, fields: dict[str, object]) -> dict[str, object]:
    return {"t": "snapshot", "g": generation_pk, **fields}


def done(
    generation_pk: int, seq: int, status: str, next_url: str | None = None
) -> dict[str, object]:
    """The end of an answer; `status` is its generation's terminal `Generation.Status`."""
    message: dict[str, object] = {"t": "done", "g": generation_pk, "seq": seq, "status": status}
    if next_url is not None:
        message["next"] = next_url
    return message


def watching(conversation_pk: int) -> dict[str, object]:
    """The socket now receives the conversation's messages (and its running answers' snapshots
    have been asked for)."""
    return {"t": "watching", "c": conversation_pk}


def not_found(conversation_pk: int) -> dict[str, object]:
    """The watched conversation does not exist (deleted) or is not the user's."""
    return {"t": "gone", "c": conversation_pk}


def generation_not_found(generation_pk: int) -> dict[str, object]:
    """The generation asked for does not exist or is not the user's (the same answer for both)."""
    return {"t": "gone", "g": generation_pk}


def error(text: str) -> dict[str, object]:
    """The browser's last message was refused; `text` says why."""
    return {"t": "error", "error": text}


def updated(generation_pk: int) -> dict[str, object]:
    return {"t": "updated", "g": generation_pk}


def spend(html: str) -> dict[str, object]:
    """The user's spend partials, rendered (`spend_push`)."""
    return {"t": "spend", "html": html}


def retitled(conversation_pk: int, title: str) -> dict[str, object]:
    """A conversation's new title, written by a model (`streaming.titles`)."""
    return {"t": "title", "c": conversation_pk, "title": title}


def sidebar_changed() -> dict[str, object]:
    """The user's conversations were organised or deleted in some tab (`views.sidebar_push`)."""
    return {"t": "sidebar"}


def cancel(generation_pk: int) -> CancelMessage:
    return {"type": CANCEL, "g": generation_pk}


def snapshot_request(generation_pk: int, reply_to: str) -> SnapshotRequestMessage:
    return {"type": SNAPSHOT_REQUEST, "g": generation_pk, "reply_to": reply_to}


def timeout_message(phase: Phase, detail: str) -> str:
    match phase:
        case "first_token":
            return f"The gateway did not start answering in time ({detail})."
        case "idle":
            return f"The answer stalled: the gateway went quiet ({detail})."
        case "total":
            return f"The answer took longer than the time allowed ({detail})."
        case _:
            return f"Could not reach the gateway in time ({detail})."
