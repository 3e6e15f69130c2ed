"""Where a collection's vectors and full text are searched: the `VectorStore` and
`FullTextIndex` interfaces (`base.py`) and the ones this deployment uses (`vector_store`,
`full_text_index`): on SQLite, sqlite-vec and FTS5 in the app's database (`sqlite.py`)."""

from __future__ import annotations

from django.db import connection

from chatapp.knowledge.stores.base import FullTextIndex, VectorStore
from chatapp.knowledge.stores.sqlite import SqliteFullTextIndex, SqliteVectorStore


def vector_store() -> VectorStore:
    if connection.vendor == "sqlite":
        return SqliteVectorStore()
    raise NotImplementedError(f"no vector store for {connection.vendor} yet")


def full_text_index() -> FullTextIndex:
    if connection.vendor == "sqlite":
        return SqliteFullTextIndex()
    raise NotImplementedError(f"no full-text index for {connection.vendor} yet")
