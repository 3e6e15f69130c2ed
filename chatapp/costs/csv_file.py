"""The filtered generations as a CSV file that opens as it should in a spreadsheet.

Choices, for Excel and LibreOffice alike: UTF-8 with a byte-order mark (without one, Excel reads a
CSV in the machine's code page and mangles any non-ASCII name); commas and CRLF line ends (RFC
4180); amounts as exact plain decimals with a dot, in the unit the `cost_unit` column names (no
exponent, no thousands separator, no rounding; a spreadsheet set to a comma-decimal locale needs
"import as text/decimal: dot"); times in ISO 8601 UTC, millisecond precision, e.g.
`2026-12-01T10:27:03.120Z`. Rows are chronological: first the daily totals retention folded
generations into (`ledger.fold`: one row per day, user, gateway, model, kind, status, unit and
cost source, with no generation ID, its day's midnight as `started_at` and its count in
`generations`), then one row per generation (`generations` 1). `groups` names the user groups a
generation was recorded as spent by (`GenerationGroup`), separated by "; ": a spreadsheet splits
them to total per group (each such generation counts in each of its groups); a folded row names
the groups of the generations it stands for.

The file is streamed in chunks of rows: under ASGI from an async iterator (each chunk read in
Django's database thread), under WSGI from a plain one, so neither server holds it whole.
"""

from __future__ import annotations

import csv
import datetime
import io
import itertools
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal

from asgiref.sync import sync_to_async
from django.db.models import F, QuerySet
from django.db.models.functions import Coalesce
from django.http import StreamingHttpResponse

from chatapp.costs.models import Generation, GenerationGroup, LedgerDay

__all__ = ["COLUMNS", "chunks", "plain", "response"]

# Each column and the field it is read from (duration_ms is worked out from the two times).
_SOURCES = (
    ("generation", "pk"),
    ("started_at", "started_at"),
    ("finished_at", "finished_at"),
    ("user", "user_shown"),
    ("gateway", "gateway__name"),
    ("model", "model"),
    ("status", "status"),
    ("generation_id", "upstream_id"),
    ("request_id", "request_id"),
    ("prompt_tokens", "prompt_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("reasoning_tokens", "reasoning_tokens"),
    ("cached_tokens", "cached_tokens"),
    ("cost", "cost"),
    ("cost_unit", "cost_unit"),
    ("cost_source", "cost_source"),
    ("cost_note", "cost_note"),
    ("ttft_ms", "ttft_ms"),
    ("duration_ms", None),
    ("conversation", "conversation_id"),
    # Last, so that the columns before keep their places: chat, image, speech (Read aloud), title
    # or transcription (voice input).
    ("kind", "kind"),
    ("generations", None),  # 1, or how many a folded row stands for
    ("groups", None),  # the groups' names, "; " between them
)
COLUMNS = tuple(column for column, _ in _SOURCES)
_FIELDS = tuple(field for _, field in _SOURCES if field is not None)
_DURATION_AT = COLUMNS.index("duration_ms")
# The user's name now, or the one kept on the row when the user was deleted.
_USER_SHOWN = Coalesce(F("user__username"), F("user_name"))
_TEXT = {"user", "gateway", "model", "generation_id", "request_id", "cost_note", "groups"}
_TEXT_AT = frozenset(index for index, name in enumerate(COLUMNS) if name in _TEXT)
# A spreadsheet evaluates a cell starting with one of these as a formula (tab and CR because some
# strip them first): a model or user named "=HYPERLINK(...)" would run on the operator's machine.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CHUNK_ROWS = 2000


def plain(amount: Decimal) -> str:
    """`amount` exactly, without exponent or trailing zeros: 0.000008100000000 -> 0.0000081."""
    text = format(amount, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _time(moment: datetime.datetime | None) -> str:
    if moment is None:
        return ""
    utc = moment.astimezone(datetime.UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _cell(value: object, text: bool) -> str:
    match value:
        case None:
            return ""
        case datetime.datetime():
            return _time(value)
        case Decimal():
            return plain(value)
        case str() if text:
            return _text(value)
    return str(value)


def _row(values: tuple[object, ...], groups: str) -> list[str]:
    started, finished = values[1], values[2]
    duration = None
    if isinstance(started, datetime.datetime) and isinstance(finished, datetime.datetime):
        duration = round((finished - started).total_seconds() * 1000)
    cells = (*values[:_DURATION_AT], duration, *values[_DURATION_AT:], 1, groups)
    return [_cell(value, index in _TEXT_AT) for index, value in enumerate(cells)]


def _folded_row(day: LedgerDay) -> list[str]:
    midnight = datetime.datetime.combine(day.day, datetime.time.min, tzinfo=datetime.UTC)
    found = {
        "started_at": midnight,
        "user": day.user.get_username() if day.user else day.user_name,
        "gateway": day.gateway.name if day.gateway else None,
        "model": day.model,
        "status": day.status,
        "prompt_tokens": day.prompt_tokens,
        "completion_tokens": day.completion_tokens,
        "reasoning_tokens": day.reasoning_tokens,
        "cached_tokens": day.cached_tokens,
        "cost": day.cost if day.priced else None,
        "cost_unit": day.cost_unit,
        "cost_source": day.cost_source,
        "cost_note": f"daily total of {day.generations} folded generations",
        "kind": day.kind,
        "generations": day.generations,
        "groups": "; ".join(day.group_names),
    }
    return [_cell(found.get(name), index in _TEXT_AT) for index, name in enumerate(COLUMNS)]


def chunks(
    queryset: QuerySet[Generation], folded: QuerySet[LedgerDay] | None = None
) -> Iterator[str]:
    """The file's text: the byte-order mark and header, then `CHUNK_ROWS` rows at a time."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # the default dialect: commas, minimal quoting, CRLF
    buffer.write("\ufeff")
    writer.writerow(COLUMNS)
    folded_rows: Iterator[list[str]] = iter(())
    if folded is not None:
        days = (
            folded.select_related("user", "gateway")
            .prefetch_related("group_links")
            .order_by("day", "pk")
        )
        folded_rows = map(_folded_row, days.iterator(chunk_size=CHUNK_ROWS))
    rows = (
        queryset.annotate(user_shown=_USER_SHOWN).order_by("started_at", "pk").values_list(*_FIELDS)
    )
    generation_rows = _with_groups(rows.iterator(chunk_size=CHUNK_ROWS))
    for count, cells in enumerate(itertools.chain(folded_rows, generation_rows), start=1):
        writer.writerow(cells)
        if count % CHUNK_ROWS == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _with_groups(rows: Iterator[tuple[object, ...]]) -> Iterator[list[str]]:
    """Each generation's cells with its groups' names, read for `CHUNK_ROWS` rows at a time."""
    for batch in itertools.batched(rows, CHUNK_ROWS):
        names: dict[object, list[str]] = {}
        links = GenerationGroup.objects.filter(generation_id__in=[values[0] for values in batch])
        for generation_pk, name in links.order_by("group_name").values_list(
            "generation_id", "group_name"
        ):
            names.setdefault(generation_pk, []).append(name)
        for values in batch:
            yield _row(values, "; ".join(names.get(values[0], ())))


def _next(pieces: Iterator[str]) -> str | None:
    return next(pieces, None)


async def _in_database_thread(pieces: Iterator[str]) -> AsyncIterator[str]:
    read = sync_to_async(_next, thread_sensitive=True)
    while (piece := await read(pieces)) is not None:
        yield piece


def response(
    queryset: QuerySet[Generation],
    filename: str,
    *,
    asynchronous: bool,
    folded: QuerySet[LedgerDay] | None = None,
) -> StreamingHttpResponse:
    pieces = chunks(queryset, folded)
    content = _in_database_thread(pieces) if asynchronous else pieces
    return StreamingHttpResponse(
        content,
        content_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
