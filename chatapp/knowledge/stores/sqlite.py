"""The embedded store: vectors in sqlite-vec's `vec0` tables and text in an FTS5 table, in the
app's own SQLite database (`patches/sqlite_backend` loads sqlite-vec into every connection).

Each embedding model (with its dimensions) has a `vec0` table of its own, named from a digest of
both, made when its first vectors arrive: vectors of two models are never compared. Collection
and file are metadata columns of every row, so a search filters inside the nearest-neighbour
scan rather than after it (a top k cut before filtering could return nothing), and a file's
vectors go with one DELETE. Distance is cosine, as embedding models are trained for.

Full text is FTS5 with the Porter stemmer ("policies" finds "policy"); a user's question is
never passed as FTS5 syntax: each word is quoted, and the words are OR-ed, ranked by BM25.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

from django.db import connection
from sqlite_vec import serialize_float32

from chatapp.knowledge.stores.base import ChunkText, ChunkVector, Hit, Scope

VECTOR_TABLE_PREFIX = "knowledge_vectors_"
TEXT_TABLE = "knowledge_text"
# Words longer than this are not words a question is asked in (a hash, a base64 run).
_WORD = re.compile(r"\w{1,64}")


_STOP_WORDS = """a about an and are as at be but by can do does for from has have how i if in
is it its me my no not of on or our should so than that the their them there these they this to
was we were what when where which who why will with would you your"""
STOP_WORDS = frozenset(_STOP_WORDS.split())


def vector_table(model: str, dimensions: int) -> str:
    digest = hashlib.sha256(f"{model}\0{dimensions}".encode()).hexdigest()[:16]
    return f"{VECTOR_TABLE_PREFIX}{digest}"


def _tables(prefix: str) -> list[str]:
    with connection.cursor() as cursor:
        # The virtual tables only: vec0 keeps each one's data in shadow tables named after it.
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%%'"
        )
        return [name for (name,) in cursor.fetchall() if name.startswith(prefix)]


def _in(values: Sequence[int]) -> str:
    return "(" + ", ".join("%s" for _ in values) + ")"


def _scope_sql(scope: Scope) -> tuple[str, list[int]]:
    sql = f" AND collection_id IN {_in(scope.collection_ids)}"
    params = list(scope.collection_ids)
    if scope.file_ids is not None:
        sql += f" AND file_id IN {_in(scope.file_ids)}"
        params += list(scope.file_ids)
    return sql, params


def _empty(scope: Scope) -> bool:
    return not scope.collection_ids or (scope.file_ids is not None and not scope.file_ids)


class SqliteVectorStore:
    """`VectorStore` over sqlite-vec."""

    def add(self, model: str, vectors: Sequence[ChunkVector]) -> None:
        if not vectors:
            return
        dimensions = len(vectors[0].vector)
        table = vector_table(model, dimensions)
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                f"chunk_id integer primary key, embedding float[{dimensions}] "
                "distance_metric=cosine, collection_id integer, file_id integer)"
            )
            chunk_ids = [v.chunk_id for v in vectors]
            cursor.execute(f"DELETE FROM {table} WHERE chunk_id IN {_in(chunk_ids)}", chunk_ids)
            cursor.executemany(
                f"INSERT INTO {table} (chunk_id, embedding, collection_id, file_id) "
                "VALUES (%s, %s, %s, %s)",
                [
                    (v.chunk_id, serialize_float32(list(v.vector)), v.collection_id, v.file_id)
                    for v in vectors
                ],
            )

    def remove_file(self, file_id: int) -> None:
        with connection.cursor() as cursor:
            for table in _tables(VECTOR_TABLE_PREFIX):
                cursor.execute(f"DELETE FROM {table} WHERE file_id = %s", [file_id])

    def nearest(self, model: str, vector: Sequence[float], scope: Scope, k: int) -> list[Hit]:
        table = vector_table(model, len(vector))
        if _empty(scope) or k < 1 or table not in _tables(table):
            return []
        where, params = _scope_sql(scope)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT chunk_id, distance FROM {table} "
                f"WHERE embedding MATCH %s AND k = %s{where} ORDER BY distance",
                [serialize_float32(list(vector)), k, *params],
            )
            return [Hit(chunk_id, -distance) for chunk_id, distance in cursor.fetchall()]


def match_expression(query: str) -> str:
    """The FTS5 expression for a user's words: each quoted (so nothing in them is syntax),
    any of them matching, the words every question holds left out (or "what is the" would
    match every passage in English)."""
    return " OR ".join(f'"{word}"' for word in dict.fromkeys(_words(query)))


def _words(query: str) -> Iterator[str]:
    for match in _WORD.finditer(query.lower()):
        if match.group() not in STOP_WORDS:
            yield match.group()


class SqliteFullTextIndex:
    """`FullTextIndex` over FTS5."""

    def _ensure(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {TEXT_TABLE} USING fts5("
                "text, chunk_id UNINDEXED, file_id UNINDEXED, collection_id UNINDEXED, "
                "tokenize = 'porter unicode61')"
            )

    def add(self, chunks: Sequence[ChunkText]) -> None:
        if not chunks:
            return
        self._ensure()
        chunk_ids = [c.chunk_id for c in chunks]
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {TEXT_TABLE} WHERE chunk_id IN {_in(chunk_ids)}", chunk_ids
            )
            cursor.executemany(
                f"INSERT INTO {TEXT_TABLE} (text, chunk_id, file_id, collection_id) "
                "VALUES (%s, %s, %s, %s)",
                [(c.text, c.chunk_id, c.file_id, c.collection_id) for c in chunks],
            )

    def remove_file(self, file_id: int) -> None:
        self._ensure()
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {TEXT_TABLE} WHERE file_id = %s", [file_id])

    def search(self, query: str, scope: Scope, k: int) -> list[Hit]:
        expression = match_expression(query)
        if not expression or _empty(scope) or k < 1:
            return []
        self._ensure()
        where, params = _scope_sql(scope)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT chunk_id, bm25({TEXT_TABLE}) FROM {TEXT_TABLE} "
                f"WHERE {TEXT_TABLE} MATCH %s{where} ORDER BY bm25({TEXT_TABLE}) LIMIT %s",
                [expression, *params, k],
            )
            # bm25() is lower for better matches.
            return [Hit(chunk_id, -rank) for chunk_id, rank in cursor.fetchall()]
