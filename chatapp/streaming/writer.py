"""The process's one writer of partial answers: every running generation's text in one batch.

A flush per generation per second meant, at 200 streams, 200 transactions a second fighting for
SQLite's one write lock, each on a connection opened for it, and they fell behind (9 writes in a 30
s answer instead of ~30). Here one thread, keeping one connection, writes everything that changed
since the last batch in one transaction of two statements, whatever the number of streams: one
`UPDATE` of the generations (heartbeat, `last_seq`, IDs) and one of their messages' text, each run
with a row of parameters per generation (`executemany`). Both are guarded by `status = streaming`,
so a batch that lands after a generation's final write changes nothing. Final writes do not come
here: they run on their own thread and never wait behind a batch (SQLite still serialises the two,
for milliseconds).

A failed batch is logged and the next one carries the same rows again (nothing is marked written
until its transaction commits), so a database that is away for a few seconds loses nothing.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from django.db import DatabaseError, connection, transaction
from django.db.models import Field
from django.utils import timezone

from chatapp.conversations.models import Message
from chatapp.costs.models import Generation

logger = logging.getLogger(__name__)

STREAMING = Generation.Status.STREAMING


@dataclass(frozen=True, slots=True)
class PartialRow:
    """One running generation's state to write. `text` is None when nothing new was sent since
    the last batch (only the heartbeat is then written)."""

    generation_pk: int
    message_pk: int
    seq: int
    upstream_id: str | None
    ttft_ms: int | None
    text: tuple[str, str, list[dict[str, Any]]] | None  # content, reasoning, tool calls


# One thread, so one connection (Django's are per thread) and batches in order.
executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chat-writer")


def write_partials(rows: list[PartialRow]) -> bool:
    """Write `rows` in one transaction; False (logged) if the database refused."""
    if not rows:
        return True
    try:
        with transaction.atomic():
            _write(rows)
    except DatabaseError as exc:
        # An outage (a restart, a failover), not a bug: one line, no traceback, every second.
        logger.warning(
            "Writing %d partial answers failed; the next batch retries (%s)", len(rows), exc
        )
        connection.close()  # a broken connection is reopened by the next batch
        return False
    except Exception:  # a bug here must show, not silently stop every answer's flushes
        logger.exception("Writing %d partial answers failed", len(rows))
        return False
    return True


def _write(rows: list[PartialRow]) -> None:
    """Two `executemany` statements, a row of parameters per generation. The ORM's form of the
    same batch (an `UPDATE` with a `CASE` of 200 `When`s per column) cost more to build than to
    run: 19% of the server's CPU at 200 streams, in resolving expressions (issue 36)."""
    quote = connection.ops.quote_name
    generations = quote(Generation._meta.db_table)
    messages = quote(Message._meta.db_table)
    now = _column(Generation, "heartbeat_at").get_db_prep_value(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {generations} SET {quote('heartbeat_at')} = %s, {quote('last_seq')} = %s, "
            f"{quote('upstream_id')} = COALESCE(%s, {quote('upstream_id')}), "
            f"{quote('ttft_ms')} = COALESCE(%s, {quote('ttft_ms')}) "
            f"WHERE {generations}.{quote('id')} = %s AND {quote('status')} = %s",
            [
                (
                    now,
                    row.seq,
                    row.upstream_id[:200] if row.upstream_id else None,
                    row.ttft_ms,
                    row.generation_pk,
                    STREAMING,
                )
                for row in rows
            ],
        )
        texts = [(row.message_pk, row.text) for row in rows if row.text is not None]
        if not texts:
            return
        tool_calls = _column(Message, "tool_calls")
        cursor.executemany(
            f"UPDATE {messages} SET {quote('content')} = %s, {quote('reasoning')} = %s, "
            f"{quote('tool_calls')} = %s WHERE {quote('id')} = %s AND EXISTS (SELECT 1 FROM "
            f"{generations} WHERE {quote('message_id')} = %s AND {quote('status')} = %s)",
            [
                (
                    content,
                    reasoning,
                    tool_calls.get_db_prep_value(calls, connection),
                    message_pk,
                    message_pk,
                    STREAMING,
                )
                for message_pk, (content, reasoning, calls) in texts
            ],
        )


def _column(model: type[Generation] | type[Message], name: str) -> Field[Any, Any]:
    return cast("Field[Any, Any]", model._meta.get_field(name))  # a plain column, no relation
