"""Importing conversations exported elsewhere (`import_formats.py` reads them) into the message
tree, marked with where they came from (`Conversation.imported_from`).

An import writes messages only: no generation and no cost, since nothing was asked of a gateway
here; its answers show with no model or price. Everything is bounded before it is stored: the
file's bytes (checked before it is read), the JSON's nesting (orjson refuses past 1,024 levels),
the conversations in a file, the messages in each and in all, and a message's length (cut, with
a note). Parsing is CPU-bound, so the view runs it on a thread of its own, off the event loop and
off the thread the app's other sync views share. One file is imported whole or not at all.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from django.db import transaction

from chatapp.conversations import import_formats, user_text
from chatapp.conversations.import_formats import Imported
from chatapp.models import Conversation, Message

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = [
    "MAX_BYTES",
    "MAX_CONVERSATIONS",
    "MAX_MESSAGES",
    "ImportRefused",
    "ImportResult",
    "parse",
    "save",
]

MAX_BYTES = 20 * 1024 * 1024  # parsed, a file takes several times this in memory
MAX_CONVERSATIONS = 2_000
MAX_MESSAGES = 100_000  # in one file, all conversations together
MAX_MESSAGE_CHARS = 200_000
TITLE_CHARS = 200
_CUT_NOTE = "\n\n[Cut here on import: the message was longer than this app keeps.]"


class ImportRefused(ValueError):
    """A file that is not imported, with the reason in words for the user."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    conversations: int
    messages: int


def parse(data: bytes) -> list[Imported]:
    """The conversations of an export file, checked against every bound; `ImportRefused` says why
    a file is not one."""
    if len(data) > MAX_BYTES:
        raise ImportRefused(f"The file is over {MAX_BYTES // (1024 * 1024)} MB.")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ImportRefused(f"This is not a JSON file ({exc.msg}).") from None
    items = [document] if isinstance(document, dict) else document
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ImportRefused(
            "This JSON is not a list of conversations: choose ChatGPT's conversations.json "
            "or an Open WebUI export."
        )
    if len(items) > MAX_CONVERSATIONS:
        raise ImportRefused(
            f"The file holds {len(items)} conversations; "
            f"at most {MAX_CONVERSATIONS} are imported at once."
        )
    conversations: list[Imported] = []
    total = 0
    for number, item in enumerate(items, 1):
        read = _read(item, number)
        total += len(read.messages)
        if total > MAX_MESSAGES:
            raise ImportRefused(
                f"The file holds over {MAX_MESSAGES} messages; split it and import each part."
            )
        if read.messages:
            conversations.append(read)
    if not conversations:
        raise ImportRefused("The file holds no conversation with messages to import.")
    return conversations


def _read(item: dict[str, Any], number: int) -> Imported:
    try:
        if "mapping" in item:
            return import_formats.chatgpt(item)
        if "chat" in item or "history" in item or "messages" in item:
            return import_formats.open_webui(item)
    except ValueError as exc:
        raise ImportRefused(f"Conversation {number} could not be read: {exc}.") from None
    raise ImportRefused(
        f"Conversation {number} is in no format this app reads: it has neither ChatGPT's "
        "mapping nor Open WebUI's chat history."
    )


@transaction.atomic
def save(user: User, conversations: list[Imported]) -> ImportResult:
    """Store the conversations as `user`'s, with their times as exported."""
    messages = 0
    for imported in conversations:
        messages += _save_one(user, imported)
    return ImportResult(len(conversations), messages)


def _save_one(user: User, imported: Imported) -> int:
    first = next((m.content for m in imported.messages if m.role == "user"), "")
    title = user_text.one_line(imported.title or first)[:TITLE_CHARS]
    conversation = Conversation.objects.create(
        user=user,
        title=title,
        # An exported title is the other app's (most often a model's): none is written here.
        title_source=Conversation.TitleSource.MODEL,
        imported_from=imported.source,
    )
    rows = [
        Message(conversation=conversation, role=message.role, content=_content(message.content))
        for message in imported.messages
    ]
    Message.objects.bulk_create(rows)  # parents first, so keys follow the export's order
    by_key = {message.key: row for message, row in zip(imported.messages, rows, strict=True)}
    fallback = imported.created or datetime.datetime.now(tz=datetime.UTC)
    for message, row in zip(imported.messages, rows, strict=True):
        row.parent = by_key[message.parent] if message.parent is not None else None
        row.created_at = message.created or fallback
    Message.objects.bulk_update(rows, ["parent", "created_at"], batch_size=500)
    shown = by_key.get(imported.current) if imported.current is not None else None
    updated = imported.updated or max((row.created_at for row in rows), default=fallback)
    Conversation.objects.filter(pk=conversation.pk).update(
        current_leaf=shown, created_at=imported.created or fallback, updated_at=updated
    )
    return len(rows)


def _content(text: str) -> str:
    text = text.replace("\x00", "")  # PostgreSQL stores no NUL
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + _CUT_NOTE
