"""The process's one writer of partial answers: every running generation's text in one batch.

A flush per generation per second meant, at 200 streams, 200 transactions a second fighting for
SQLite's one write lock, each on a connection opened for it, and they fell behind (9 writes in a
30 s answer instead of ~30). Here one thread, keeping one connection, writes everything that
changed since the last batch in one transaction of two statements, whatever the number of streams:
one `UPDATE` of the generations (heartbeat, `last_seq`, IDs; a `CASE` per column) and one of their
messages' text. Both are guarded by `status = streaming`, so a batch that lands after a
generation's final write changes nothing. Final writes do not come here: they run on their own
thread and never wait behind a batch (SQLite still serialises the two, for milliseconds).

A failed batch is logged and the next one carries the same rows again (nothing is marked written
until its transaction commits), so a database that is away for a few seconds loses nothing.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from django.db import DatabaseError, connection, transaction
from django.db.models import Case, Field, Value, When
from django.utils import timezone

from chatapp.models import Generation, Message

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


_MESSAGE_FIELDS = (Message.content.field, Message.reasoning.field, Message.tool_calls.field)


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
    pks = [row.generation_pk for row in rows]

    def column(name: str) -> Field[Any, Any]:
        return cast(
            "Field[Any, Any]", Generation._meta.get_field(name)
        )  # a plain column, no relation

    fields: dict[str, Any] = {
        "heartbeat_at": timezone.now(),
        "last_seq": Case(
            *(When(pk=row.generation_pk, then=Value(row.seq)) for row in rows),
            default="last_seq",
            output_field=column("last_seq"),
        ),
    }
    upstream = [row for row in rows if row.upstream_id]
    if upstream:
        fields["upstream_id"] = Case(
            *(
                When(pk=row.generation_pk, then=Value((row.upstream_id or "")[:200]))
                for row in upstream
            ),
            default="upstream_id",
            output_field=column("upstream_id"),
        )
    timed = [row for row in rows if row.ttft_ms is not None]
    if timed:
        fields["ttft_ms"] = Case(
            *(When(pk=row.generation_pk, then=Value(row.ttft_ms)) for row in timed),
            default="ttft_ms",
            output_field=column("ttft_ms"),
        )
    Generation.objects.filter(pk__in=pks, status=STREAMING).update(**fields)

    changed = [row for row in rows if row.text is not None]
    if not changed:
        return
    columns: dict[str, list[When]] = {"content": [], "reasoning": [], "tool_calls": []}
    tool_calls_field = Message.tool_calls.field
    for row in changed:
        assert row.text is not None
        content, reasoning, tool_calls = row.text
        columns["content"].append(When(pk=row.message_pk, then=Value(content)))
        columns["reasoning"].append(When(pk=row.message_pk, then=Value(reasoning)))
        columns["tool_calls"].append(
            When(pk=row.message_pk, then=Value(tool_calls, output_field=tool_calls_field))
        )
    Message.objects.filter(
        pk__in=[row.message_pk for row in changed], generation__status=STREAMING
    ).update(
        **{
            name: Case(*whens, default=name, output_field=field)
            for (name, whens), field in zip(columns.items(), _MESSAGE_FIELDS, strict=True)
        }
    )
