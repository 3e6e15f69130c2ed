"""The two small interfaces retrieval searches through, so that the embedded store (SQLite with
sqlite-vec and FTS5, `sqlite.py`) and a server's (`make cluster`) are interchangeable.

Both are synchronous (Django's connection and the stores' clients are); retrieval calls them
through `sync_to_async`. Every method names the collections it may look in: a store never
decides who may see what, it only never returns a chunk outside the collections it is given.

Vectors are compared only with vectors of the same embedding model (`model`, as
`KnowledgeFile.embedding_model` records it): a store keeps each model's apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ChunkVector:
    """One chunk's embedding, with the keys a search filters on."""

    chunk_id: int
    file_id: int
    collection_id: int
    vector: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class ChunkText:
    """One chunk's text for the full-text index, with the keys a search filters on."""

    chunk_id: int
    file_id: int
    collection_id: int
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk a search found; hits come best first, and only their order is used (fusion)."""

    chunk_id: int
    score: float


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a search may look: these collections, and, when `file_ids` is not None, only these
    files of them (the user chose files rather than whole collections)."""

    collection_ids: tuple[int, ...]
    file_ids: tuple[int, ...] | None = None


class VectorStore(Protocol):
    def add(self, model: str, vectors: Sequence[ChunkVector]) -> None:
        """Keep `vectors` (made by `model`); adding a chunk's again replaces it."""

    def remove_file(self, file_id: int) -> None:
        """Forget every vector of the file, whatever model made them."""

    def nearest(self, model: str, vector: Sequence[float], scope: Scope, k: int) -> list[Hit]:
        """The `k` chunks in `scope` whose vectors by `model` are closest to `vector`."""


class FullTextIndex(Protocol):
    def add(self, chunks: Sequence[ChunkText]) -> None:
        """Index `chunks`; indexing a chunk again replaces it."""

    def remove_file(self, file_id: int) -> None:
        """Forget every chunk of the file."""

    def search(self, query: str, scope: Scope, k: int) -> list[Hit]:
        """The `k` chunks in `scope` that match the words of `query` best. `query` is a
        user's text, never the index's query syntax: a store quotes it."""
