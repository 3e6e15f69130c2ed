"""Where a collection's vectors and full text are searched: the `VectorStore` and
`FullTextIndex` interfaces (`base.py`) and the ones this deployment uses (`vector_store`,
`full_text_index`): on SQLite, sqlite-vec and FTS5 in the app's database (`sqlite.py`); with
`CHAT_CHROMA_URL` (`make cluster`), a Chroma server's (`chroma.py`) and PostgreSQL's text search
(`postgresql.py`)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from chatapp.knowledge.stores.base import FullTextIndex, VectorStore
from chatapp.knowledge.stores.chroma import ChromaVectorStore
from chatapp.knowledge.stores.postgresql import PostgresFullTextIndex
from chatapp.knowledge.stores.sqlite import SqliteFullTextIndex, SqliteVectorStore


def vector_store() -> VectorStore:
    if settings.CHAT_CHROMA_URL:
        return ChromaVectorStore(settings.CHAT_CHROMA_URL)
    if connection.vendor == "sqlite":
        return SqliteVectorStore()
    raise ImproperlyConfigured(
        f"Knowledge collections on {connection.vendor} need a vector server: set CHAT_CHROMA_URL."
    )


def full_text_index() -> FullTextIndex:
    if connection.vendor == "postgresql":
        return PostgresFullTextIndex()
    if connection.vendor == "sqlite":
        return SqliteFullTextIndex()
    raise ImproperlyConfigured(f"No full-text index for {connection.vendor}.")
