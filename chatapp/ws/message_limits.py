"""What the page's websocket accepts from a browser: message size, message rate, and shape.

The page sends a few small JSON commands (`watch`, `snapshot`, `stop`), a handful a minute, so the
limits sit far above normal use and far below what would cost the server. The rate is a token
bucket per socket (a burst, then a steady rate): a message beyond it is dropped with one error to
say so, and a socket that keeps sending a burst's worth more is closed with `CLOSE_TOO_FAST`. A
message that is too large or malformed is dropped with an error; the socket stays open, since one
bad message says nothing about the next. Errors go to the browser as `{"t": "error", "error"}`
(`socket_messages.error`). Past Daphne's own cap (1 MiB, `--websocket_max_message_size`) a message
never reaches the consumer: Daphne fails the connection (1009, "message too big") by dropping it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

import orjson

from chatapp.errors import ChatAppError

CLOSE_TOO_FAST = 4429  # like HTTP 429: the socket sent far more than its budget
_MAX_ID = 2**63 - 1  # the database's integer keys; larger values cannot name a row

type CommandType = Literal["watch", "snapshot", "stop"]
type Command = tuple[CommandType, int]

# Each command the browser may send, and the field holding the ID it names (a conversation, `c`,
# or a generation, `g`): the consumer checks the user owns it.
ID_FIELDS: dict[str, str] = {"watch": "c", "snapshot": "g", "stop": "g"}


class BadCommand(ChatAppError):
    """A websocket message the consumer cannot act on; the text is what the browser is told."""


@dataclass(slots=True)
class MessageBudget:
    """A token bucket: `burst` messages at once, refilled at `rate` a second. `refused` counts
    the messages refused since the bucket was last full (the sender quiet long enough to refill
    it), so a flood that slows just below the limit now and then still adds up."""

    rate: float
    burst: int
    tokens: float = field(init=False)
    last: float | None = None
    refused: int = 0

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def take(self, now: float) -> bool:
        if self.last is not None:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= self.burst:
            self.refused = 0
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        self.refused += 1
        return False


def too_fast(rate: float) -> str:
    return f"Too many messages: this socket may send at most {rate:g} a second."


def too_large(limit: int) -> str:
    return f"The message is too large (at most {limit:,} characters)."


def parse_command(text_data: str | None) -> Command:
    """The command a browser message stands for, or `BadCommand` saying what is wrong."""
    if text_data is None:  # a binary frame
        raise BadCommand("Binary messages are not accepted; send JSON text.")
    try:
        message = orjson.loads(text_data)
    except orjson.JSONDecodeError:
        raise BadCommand("The message is not valid JSON.") from None
    if not isinstance(message, dict):
        raise BadCommand("The message must be a JSON object with a type, `t`.")
    kind = message.get("t")
    if not isinstance(kind, str) or kind not in ID_FIELDS:
        expected = ", ".join(ID_FIELDS)
        raise BadCommand(f"Unknown message type {_shown(kind)} (expected one of {expected}).")
    return cast("CommandType", kind), _id(message, ID_FIELDS[kind])


def _id(message: dict[str, Any], key: str) -> int:
    value = message.get(key)
    # bool is an int subclass: `true` must not mean conversation 1.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ID:
        raise BadCommand(f"`{key}` must be a positive integer ID.")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
