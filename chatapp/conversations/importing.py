"""Importing conversations exported elsewhere (`import_formats.py` reads them) into the message
tree, marked with where they came from (`Conversation.imported_from`).

An import writes messages only: no generation and no cost, since nothing was asked of a gateway
here; its answers show the model the other app named, and no price. A file is JSON, or the ZIP
ChatGPT mails, of which only `conversations.json` is read (`export_zip.py`). Everything is bounded
before it is stored: the file's bytes (checked before it is read), the JSON's nesting (orjson
refuses past 1,024 levels), the conversations in a file, the messages in all (a run of one role
merged into one message counts as the messages it was), a message's length (cut, with a note,
after a merge), and the CPU time reading takes (`MAX_SECONDS`). Parsing is CPU-bound, so the view
runs it on a thread of its own, off the event loop and off the thread the app's other sync views
share, one import per user at a time. One file is imported whole or not at all; every refusal is
in words (`ImportRefused`), with numbers grouped by thousands.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from django.db import connection, transaction
from django.db.models import Field

from chatapp.access.body_limits import MAX_IMPORT_BYTES
from chatapp.conversations import export_zip, import_formats, user_text
from chatapp.conversations.import_formats import Imported
from chatapp.conversations.models import Conversation, Message

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = [
    "MAX_CONVERSATIONS",
    "MAX_MESSAGES",
    "MAX_SECONDS",
    "ImportRefused",
    "ImportResult",
    "parse",
    "save",
]

MAX_CONVERSATIONS = 2_000
MAX_MESSAGES = 100_000  # in one file, all conversations together
MAX_MESSAGE_CHARS = 200_000
MAX_SECONDS = 20.0  # of reading one file, past which it is refused (a 20 MB file takes ~1 s)
TITLE_CHARS = 200
_CUT_NOTE = "\n\n[Cut here on import: the message was longer than this app keeps.]"


class ImportRefused(ValueError):
    """A file that is not imported, with the reason in words for the user."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    conversations: int
    messages: int


def parse(data: bytes) -> list[Imported]:
    """The conversations of an export file (JSON, or a ZIP holding `conversations.json`), checked
    against every bound; `ImportRefused` says why a file is not one."""
    deadline = time.monotonic() + MAX_SECONDS
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportRefused(f"The file is over {MAX_IMPORT_BYTES // (1024 * 1024)} MB.")
    if export_zip.is_zip(data):
        try:
            data = export_zip.conversations_json(data, MAX_IMPORT_BYTES)
        except export_zip.NotReadable as exc:
            raise ImportRefused(str(exc)) from None
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ImportRefused(
            f"This is not a JSON file: it stops being JSON at line {exc.lineno:,}, column "
            f"{exc.colno:,}. Choose the ZIP ChatGPT mailed you, its conversations.json, or an "
            "Open WebUI export."
        ) from None
    items = [document] if isinstance(document, dict) else document
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ImportRefused(
            "This JSON is not a list of conversations: choose ChatGPT's conversations.json "
            "or an Open WebUI export."
        )
    if len(items) > MAX_CONVERSATIONS:
        raise ImportRefused(
            f"The file holds {len(items):,} conversations; "
            f"at most {MAX_CONVERSATIONS:,} are imported at once."
        )
    conversations: list[Imported] = []
    total = 0
    for number, item in enumerate(items, 1):
        read = _read(item, number, deadline)
        total += sum(message.parts for message in read.messages)
        if total > MAX_MESSAGES:
            raise ImportRefused(
                f"The file holds over {MAX_MESSAGES:,} messages; split it and import each part."
            )
        if read.messages:
            conversations.append(read)
    if not conversations:
        raise ImportRefused("The file holds no conversation with messages to import.")
    return conversations


def _read(item: dict[str, Any], number: int, deadline: float) -> Imported:
    try:
        if "mapping" in item:
            return import_formats.chatgpt(item, deadline)
        if "chat" in item or "history" in item or "messages" in item:
            return import_formats.open_webui(item, deadline)
    except ValueError as exc:
        raise ImportRefused(f"Conversation {number:,} could not be read: {exc}.") from None
    except import_formats.OutOfTime:
        raise ImportRefused(
            f"Reading the file took longer than {MAX_SECONDS:g} s, the most one import may take "
            f"(it stopped at conversation {number:,}): split it and import each part."
        ) from None
    raise ImportRefused(
        f"Conversation {number:,} is in no format this app reads: it has neither ChatGPT's "
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
        Message(
            conversation=conversation,
            role=message.role,
            content=_content(message.content),
            imported_model=message.model,
        )
        for message in imported.messages
    ]
    Message.objects.bulk_create(rows)  # parents first, so keys follow the export's order
    by_key = {message.key: row for message, row in zip(imported.messages, rows, strict=True)}
    fallback = imported.created or datetime.datetime.now(tz=datetime.UTC)
    for message, row in zip(imported.messages, rows, strict=True):
        row.parent = by_key[message.parent] if message.parent is not None else None
        row.created_at = message.created or fallback
    _link(rows)
    shown = by_key.get(imported.current) if imported.current is not None else None
    updated = imported.updated or max((row.created_at for row in rows), default=fallback)
    Conversation.objects.filter(pk=conversation.pk).update(
        current_leaf=shown, created_at=imported.created or fallback, updated_at=updated
    )
    return len(rows)


def _link(rows: list[Message]) -> None:
    """Store the rows' parents and times, one plain UPDATE a row: Django's `bulk_update` builds
    a CASE of every row of a batch per field, which took 8 of 11 s for 5,000 messages (minutes
    at the cap, holding SQLite's write lock, beyond the import's CPU bound; #45)."""
    created = Message._meta.get_field("created_at")
    assert isinstance(created, Field)
    parent_id, created_at, pk = (_column(name) for name in ("parent", "created_at", "id"))
    table = connection.ops.quote_name(Message._meta.db_table)
    sql = f"UPDATE {table} SET {parent_id} = %s, {created_at} = %s WHERE {pk} = %s"
    values = [
        (row.parent_id, created.get_db_prep_save(row.created_at, connection), row.pk)
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, values)


def _column(name: str) -> str:
    field = Message._meta.get_field(name)
    assert isinstance(field, Field)  # not a reverse relation
    return connection.ops.quote_name(str(field.column))


def _content(text: str) -> str:
    text = text.replace("\x00", "")  # PostgreSQL stores no NUL
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + _CUT_NOTE
