"""The cluster's vector store: a Chroma server (`chroma run`, started by `make cluster`) over its
REST API (`/api/v2`), with httpx.

Not the `chromadb` client package: it pulls OpenTelemetry, PostHog telemetry and pins of its own
(pydantic among them) into the app's environment for what is a handful of JSON requests. Chroma
runs from a virtualenv of its own (`make chroma`).

As in the embedded store, each embedding model (with its dimensions) has a collection of its own
on the server, named as the embedded store names its tables (`sqlite.vector_table`), with cosine
distance; collection and file are each vector's metadata, so a search filters inside the
nearest-neighbour search (Chroma's `where`), never after a top k cut.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx

from chatapp.errors import ChatAppError
from chatapp.knowledge.stores.base import ChunkVector, Hit, Scope
from chatapp.knowledge.stores.sqlite import VECTOR_TABLE_PREFIX, vector_table

__all__ = ["ChromaUnavailable", "ChromaVectorStore"]

_ROOT = "/api/v2/tenants/default_tenant/databases/default_database/collections"
_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_UPSERT_BATCH = 1_000  # vectors a request: well under Chroma's default payload cap

_clients: dict[str, httpx.Client] = {}
_ids: dict[tuple[str, str], str] = {}  # (server, collection name) -> Chroma's collection id
_lock = threading.Lock()


class ChromaUnavailable(ChatAppError):
    """The Chroma server did not answer, or answered with an error (its words kept)."""


class ChromaVectorStore:
    """`VectorStore` on the Chroma server at `url` (e.g. `http://127.0.0.1:8100`)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        with _lock:
            client = _clients.get(self.url)
            if client is None:
                client = _clients[self.url] = httpx.Client(base_url=self.url, timeout=_TIMEOUT)
        self._http = client

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise ChromaUnavailable(
                f"The vector store at {self.url} is unreachable: {exc}"
            ) from exc
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            said = response.text[:300]
            raise ChromaUnavailable(f"The vector store answered {response.status_code}: {said}")
        return response.json()

    def _collection(self, name: str, *, create: bool) -> str | None:
        key = (self.url, name)
        if (known := _ids.get(key)) is not None:
            return known
        if create:
            body = {
                "name": name,
                "get_or_create": True,
                "configuration": {"hnsw": {"space": "cosine"}},
            }
            found = self._call("POST", _ROOT, body)
        else:
            found = next((c for c in self._listed() if c.get("name") == name), None)
        if not found:
            return None
        collection_id = str(found["id"])
        _ids[key] = collection_id
        return collection_id

    def _listed(self) -> list[dict[str, Any]]:
        listed = self._call("GET", _ROOT)
        return [c for c in listed or () if isinstance(c, dict)]

    def add(self, model: str, vectors: Sequence[ChunkVector]) -> None:
        if not vectors:
            return
        name = vector_table(model, len(vectors[0].vector))
        for start in range(0, len(vectors), _UPSERT_BATCH):
            batch = vectors[start : start + _UPSERT_BATCH]
            body = {
                "ids": [str(v.chunk_id) for v in batch],
                "embeddings": [list(v.vector) for v in batch],
                "metadatas": [
                    {"collection_id": v.collection_id, "file_id": v.file_id} for v in batch
                ],
            }
            for _ in range(2):  # a collection deleted on the server since: made again, once
                collection_id = self._collection(name, create=True)
                if self._call("POST", f"{_ROOT}/{collection_id}/upsert", body) is not None:
                    break
                _ids.pop((self.url, name), None)
            else:
                raise ChromaUnavailable(f"The vector store lost its collection {name}.")

    def remove_file(self, file_id: int) -> None:
        for listed in self._listed():
            if str(listed.get("name", "")).startswith(VECTOR_TABLE_PREFIX):
                path = f"{_ROOT}/{listed['id']}/delete"
                self._call("POST", path, {"where": {"file_id": file_id}})

    def nearest(self, model: str, vector: Sequence[float], scope: Scope, k: int) -> list[Hit]:
        empty = not scope.collection_ids or (scope.file_ids is not None and not scope.file_ids)
        if empty or k < 1:
            return []
        collection_id = self._collection(vector_table(model, len(vector)), create=False)
        if collection_id is None:
            return []
        where: dict[str, Any] = {"collection_id": {"$in": list(scope.collection_ids)}}
        if scope.file_ids is not None:
            where = {"$and": [where, {"file_id": {"$in": list(scope.file_ids)}}]}
        found = self._call(
            "POST",
            f"{_ROOT}/{collection_id}/query",
            {
                "query_embeddings": [list(vector)],
                "n_results": k,
                "where": where,
                "include": ["distances"],
            },
        )
        if not found:
            return []
        ids, distances = found["ids"][0], found["distances"][0]
        return [Hit(int(chunk_id), -float(d)) for chunk_id, d in zip(ids, distances, strict=True)]
