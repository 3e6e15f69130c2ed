"""The cluster's full-text index: PostgreSQL's own text search, in the app's database, beside
the vectors on the Chroma server (`chroma.py`).

One table, made when the first text arrives (as the embedded store's FTS5 table is), its
`tsvector` generated from the text with the `english` configuration (stemming: "policies" finds
"policy") and a GIN index. A user's question is never text-search syntax: its words (letters and
digits only, so none is an operator) are each a term, OR-ed, the words every question holds left
out as the embedded index leaves them (`sqlite.STOP_WORDS`), ranked by `ts_rank_cd`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.db import connection

from chatapp.knowledge.stores.base import ChunkText, Hit, Scope
from chatapp.knowledge.stores.sqlite import STOP_WORDS, TEXT_TABLE

__all__ = ["PostgresFullTextIndex", "ts_query"]

_WORD = re.compile(r"[^\W_]{1,64}")  # no underscore: a query's words are letters and digits
_made: set[str] = set()  # the databases whose table this process has seen made


def ts_query(query: str) -> str:
    """The `to_tsquery` text for a user's words: each a term, any matching; "" for none."""
    words = (w for w in _WORD.findall(query.lower()) if w not in STOP_WORDS)
    return " | ".join(dict.fromkeys(words))


class PostgresFullTextIndex:
    """`FullTextIndex` over PostgreSQL's text search."""

    def _ensure(self) -> None:
        # Once per process and database: `CREATE INDEX IF NOT EXISTS` takes a lock on the table
        # before it finds the index there, which every search would otherwise queue behind.
        database = str(connection.settings_dict.get("NAME"))
        if database in _made:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {TEXT_TABLE} ("
                "chunk_id bigint PRIMARY KEY, file_id bigint NOT NULL, "
                "collection_id bigint NOT NULL, text text NOT NULL, "
                "document tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED)"
            )
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {TEXT_TABLE}_document "
                f"ON {TEXT_TABLE} USING gin (document)"
            )
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {TEXT_TABLE}_file ON {TEXT_TABLE} (file_id)"
            )
        connection.on_commit(lambda: _made.add(database))  # not before the table is there

    def add(self, chunks: Sequence[ChunkText]) -> None:
        if not chunks:
            return
        self._ensure()
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {TEXT_TABLE} (chunk_id, file_id, collection_id, text) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (chunk_id) DO UPDATE SET "
                "file_id = excluded.file_id, collection_id = excluded.collection_id, "
                "text = excluded.text",
                [(c.chunk_id, c.file_id, c.collection_id, c.text) for c in chunks],
            )

    def remove_file(self, file_id: int) -> None:
        self._ensure()
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {TEXT_TABLE} WHERE file_id = %s", [file_id])

    def search(self, query: str, scope: Scope, k: int) -> list[Hit]:
        terms = ts_query(query)
        empty = not scope.collection_ids or (scope.file_ids is not None and not scope.file_ids)
        if not terms or empty or k < 1:
            return []
        self._ensure()
        sql = (
            f"SELECT chunk_id, ts_rank_cd(document, q) AS rank FROM {TEXT_TABLE}, "
            "to_tsquery('english', %s) AS q WHERE document @@ q AND collection_id = ANY(%s)"
        )
        params: list[Any] = [terms, list(scope.collection_ids)]
        if scope.file_ids is not None:
            sql += " AND file_id = ANY(%s)"
            params.append(list(scope.file_ids))
        with connection.cursor() as cursor:
            cursor.execute(f"{sql} ORDER BY rank DESC, chunk_id LIMIT %s", [*params, k])
            return [Hit(chunk_id, float(rank)) for chunk_id, rank in cursor.fetchall()]
