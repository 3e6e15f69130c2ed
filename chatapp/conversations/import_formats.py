"""Conversations exported by ChatGPT and by Open WebUI, read into one shape (`Imported`).

ChatGPT's `conversations.json` is a list of conversations, each a `mapping` of nodes by ID with
`parent` and `children` (a regenerated answer or an edited question is a second child) and
`current_node`, the leaf it showed; a node's `message` has `author.role`, `content.content_type`
and `content.parts`, and `create_time` in Unix seconds. Open WebUI's export is a list of chats,
each `{"title", "chat": {"history": {"messages": {id: {"parentId", "childrenIds", "role",
"content", "timestamp"}}, "currentId"}}, "created_at", "updated_at"}`, or with only a flat
`chat.messages` list in older exports.

Only what a person wrote and what the model answered them is kept: system prompts, tool calls and
their output, hidden context and reasoning summaries are left out, and a message whose parent was
left out hangs from the nearest message kept above it. Two kept messages of one role in a row (an
answer around a tool run) become one, its parts joined once at the end (joined one by one, a chain
of 20 MB took 164 s) and counted as the messages they were (`ImportedMessage.parts`). Every walk is
iterative with a set of visited IDs, so a deep or cyclic mapping costs its size and no more; the
caller bounds that size (`importing.py`) and passes a deadline that every walk checks
(`OutOfTime`). A time is taken only between `EARLIEST` and a day from now: a message's time
outside is read as absent (the importer falls back on its conversation's time, then on now).
"""

from __future__ import annotations

import datetime
import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["EARLIEST", "Imported", "ImportedMessage", "OutOfTime", "chatgpt", "open_webui"]

Role = Literal["user", "assistant"]
Source = Literal["chatgpt", "open_webui"]
# What a ChatGPT node holds that is conversation, by content type; the rest is tools and context.
_CHATGPT_TEXT = {"text", "multimodal_text"}
# No export of a chat app holds a message written before this; a clock 1 day fast is tolerated.
EARLIEST = datetime.datetime(2015, 1, 1, tzinfo=datetime.UTC)
_LATEST_AHEAD = datetime.timedelta(days=1)
_CHECK_EVERY = 1024  # nodes between two looks at the clock


class OutOfTime(Exception):
    """Reading an export went past its deadline."""


@dataclass(frozen=True, slots=True)
class ImportedMessage:
    key: str  # the export's ID of the message
    parent: str | None  # the key of the message kept above it
    role: Role
    content: str
    created: datetime.datetime | None
    model: str = ""  # the model the other app says answered ("" for a question or when unsaid)
    parts: int = 1  # how many messages of the export it holds (one role's run, merged)


@dataclass(frozen=True, slots=True)
class Imported:
    """One conversation as exported, its messages parents first (siblings oldest first)."""

    source: Source
    title: str
    messages: tuple[ImportedMessage, ...]
    current: str | None  # the key of the last message of the branch it showed
    created: datetime.datetime | None
    updated: datetime.datetime | None


@dataclass(slots=True)
class _Node:
    """A node of either format, as read: `role` None for one that is not kept."""

    parent: str | None
    children: list[str]
    role: Role | None
    content: str
    created: datetime.datetime | None
    model: str = ""


@dataclass(slots=True)
class _Run:
    """A kept message as the walk builds it: one role's run of nodes, joined at the end."""

    key: str
    parent: str | None
    role: Role
    created: datetime.datetime | None
    model: str
    texts: list[str] = field(default_factory=list)


class _Clock:
    """The deadline, looked at every `_CHECK_EVERY` ticks."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        if self.ticks % _CHECK_EVERY == 0 and time.monotonic() > self.deadline:
            raise OutOfTime


def chatgpt(item: dict[str, Any], deadline: float = math.inf) -> Imported:
    """`OutOfTime` past `deadline` (a `time.monotonic()`)."""
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise ValueError("a ChatGPT conversation without a mapping")
    clock = _Clock(deadline)
    nodes: dict[str, _Node] = {}
    for key, node in mapping.items():
        clock.tick()
        if isinstance(node, dict):
            nodes[str(key)] = _chatgpt_node(node)
    messages, current = _walk(nodes, item.get("current_node"), clock)
    return Imported(
        "chatgpt",
        _text(item.get("title")),
        messages,
        current,
        _time(item.get("create_time")),
        _time(item.get("update_time")),
    )


def open_webui(item: dict[str, Any], deadline: float = math.inf) -> Imported:
    """`OutOfTime` past `deadline` (a `time.monotonic()`)."""
    clock = _Clock(deadline)
    chat = _dict(item.get("chat")) or item
    history = _dict(chat.get("history"))
    nodes: dict[str, _Node] = {}
    current = None
    if isinstance(history.get("messages"), dict):
        for key, message in history["messages"].items():
            clock.tick()
            if isinstance(message, dict):
                nodes[str(key)] = _webui_node(message, message.get("parentId"))
        current = history.get("currentId")
    elif isinstance(chat.get("messages"), list):
        before: str | None = None
        for index, message in enumerate(chat["messages"]):
            clock.tick()
            if isinstance(message, dict):
                key = str(message.get("id") or f"#{index}")
                nodes[key] = _webui_node(message, message.get("parentId", before))
                before = key
        current = before
    else:
        raise ValueError("an Open WebUI chat without history or messages")
    for key, node in nodes.items():  # children from parents: exports disagree on childrenIds
        if node.parent in nodes:
            nodes[node.parent].children.append(key)
    messages, shown = _walk(nodes, current, clock)
    return Imported(
        "open_webui",
        _text(item.get("title") or chat.get("title")),
        messages,
        shown,
        _time(item.get("created_at") or chat.get("timestamp")),
        _time(item.get("updated_at")),
    )


def _chatgpt_node(node: dict[str, Any]) -> _Node:
    listed = node.get("children")
    children = [key for key in listed if isinstance(key, str)] if isinstance(listed, list) else []
    parent = node.get("parent")
    message = node.get("message")
    read = _Node(str(parent) if parent is not None else None, children, None, "", None)
    if not isinstance(message, dict):
        return read
    author = _dict(message.get("author"))
    content = _dict(message.get("content"))
    metadata = _dict(message.get("metadata"))
    role = author.get("role")
    if (
        role not in ("user", "assistant")
        or content.get("content_type") not in _CHATGPT_TEXT
        or message.get("recipient", "all") != "all"  # a call to a tool
        or metadata.get("is_visually_hidden_from_conversation")
    ):
        return read
    parts = content.get("parts")
    parts = parts if isinstance(parts, list) else []
    texts = [part if isinstance(part, str) else _attachment_note(part) for part in parts]
    read.role = "user" if role == "user" else "assistant"
    read.content = "\n\n".join(text for text in texts if text.strip())
    read.created = _time(message.get("create_time"))
    read.model = _model(metadata.get("model_slug")) if read.role == "assistant" else ""
    return read


def _attachment_note(part: object) -> str:
    if isinstance(part, dict) and "image" in str(part.get("content_type", "")):
        return "[An image was attached here; images are not imported.]"
    return "[An attachment was here; attachments are not imported.]"


def _webui_node(message: dict[str, Any], parent: object) -> _Node:
    role = message.get("role")
    content = message.get("content")
    return _Node(
        str(parent) if parent is not None else None,
        [],
        role if role in ("user", "assistant") else None,
        content if isinstance(content, str) else "",
        _time(message.get("timestamp")),
        _model(message.get("model")) if role == "assistant" else "",
    )


def _walk(
    nodes: dict[str, _Node], current: object, clock: _Clock
) -> tuple[tuple[ImportedMessage, ...], str | None]:
    """The kept messages, parents first, each hung from its nearest kept ancestor; and the kept
    message that stands for the node `current` (itself, the one it was folded into, or the
    nearest kept above it)."""
    runs: dict[str, _Run] = {}
    stands_for: dict[str, str | None] = {}
    roots = [key for key, node in nodes.items() if node.parent not in nodes]
    stack: list[tuple[str, str | None]] = [(key, None) for key in reversed(roots)]
    while stack:
        clock.tick()
        key, above = stack.pop()
        if key in stands_for or key not in nodes:
            continue
        node = nodes[key]
        here = above
        if node.role is not None and node.content.strip():
            previous = runs.get(above) if above is not None else None
            if previous is not None and previous.role == node.role:
                previous.texts.append(node.content)
                previous.model = previous.model or node.model
            else:
                runs[key] = _Run(key, above, node.role, node.created, node.model, [node.content])
                here = key
        stands_for[key] = here
        stack.extend((child, here) for child in reversed(node.children))
    shown = stands_for.get(str(current)) if current is not None else None
    messages = tuple(
        ImportedMessage(
            run.key,
            run.parent,
            run.role,
            "\n\n".join(run.texts),
            run.created,
            run.model,
            len(run.texts),
        )
        for run in runs.values()
    )
    return messages, shown


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _model(value: object) -> str:
    return " ".join(value.split())[:100] if isinstance(value, str) else ""


def _time(value: object) -> datetime.datetime | None:
    """Unix seconds (or milliseconds, which some exports use) as an aware time; None if absent
    or outside `EARLIEST` to a day from now."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = value / 1000 if value > 100_000_000_000 else value
    try:
        moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    latest = datetime.datetime.now(tz=datetime.UTC) + _LATEST_AHEAD
    return moment if EARLIEST <= moment <= latest else None
