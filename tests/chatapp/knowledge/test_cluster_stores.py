"""The cluster's stores on their real servers: the Chroma vector store (`stores/chroma.py`)
against a `chroma run` server (the one `CHAT_CHROMA_URL` names, else one started here from
`make chroma`'s virtualenv), and PostgreSQL's full-text index (`stores/postgresql.py`, skipped on
SQLite). tests/multiprocess/test_knowledge_stores_on_postgresql.py runs this module on the private
cluster's PostgreSQL and Chroma, where nothing may skip."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection

from chatapp.knowledge.stores.base import ChunkText, ChunkVector, Scope
from chatapp.knowledge.stores.chroma import ChromaVectorStore
from chatapp.knowledge.stores.postgresql import PostgresFullTextIndex, ts_query
from chatapp.knowledge.stores.sqlite import vector_table
from deploy.services import CHROMA, ServiceError, chroma_server

# chunk id: (file, collection, vector), as test_sqlite_store's
VECTORS = {
    1: (10, 100, (1.0, 0.0, 0.0)),
    2: (10, 100, (0.9, 0.1, 0.0)),
    3: (11, 100, (0.0, 1.0, 0.0)),
    4: (20, 200, (1.0, 0.0, 0.0)),  # another collection: as close as chunk 1
}
# Chroma's server is started as a process (`make test-quick` leaves the module out).
pytestmark = [pytest.mark.processes]
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL's text search (tests/multiprocess runs this on PostgreSQL)",
)


@pytest.fixture(scope="module")
def chroma_url() -> Iterator[str]:
    if url := os.environ.get("CHAT_CHROMA_URL"):
        yield url
        return
    unreachable = CHROMA.parent.parent / ".unreachable"
    if unreachable.exists():
        pytest.skip(unreachable.read_text().strip())
    try:
        with chroma_server() as (url, _):
            yield url
    except ServiceError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def model() -> str:
    """A model name of this test's own: the server may be shared with other tests."""
    return f"m-{uuid.uuid4().hex[:8]}"


def stored(url: str, model: str) -> ChromaVectorStore:
    store = ChromaVectorStore(url)
    store.add(
        model,
        [
            ChunkVector(chunk, file, collection, vector)
            for chunk, (file, collection, vector) in VECTORS.items()
        ],
    )
    return store


def test_nearest_is_within_the_collections_given(chroma_url: str, model: str) -> None:
    store = stored(chroma_url, model)
    hits = store.nearest(model, (1.0, 0.0, 0.0), Scope((100,)), k=10)
    assert [h.chunk_id for h in hits] == [1, 2, 3]
    assert hits[0].score > hits[1].score > hits[2].score
    two = store.nearest(model, (1.0, 0.0, 0.0), Scope((100, 200)), k=2)
    assert sorted(h.chunk_id for h in two) == [1, 4]
    assert [h.chunk_id for h in store.nearest(model, (1, 0, 0), Scope((100,), (11,)), k=5)] == [3]
    assert store.nearest(model, (1, 0, 0), Scope(()), k=5) == []
    assert store.nearest(model, (1, 0, 0), Scope((100,), ()), k=5) == []


def test_models_are_kept_apart(chroma_url: str, model: str) -> None:
    store = stored(chroma_url, model)
    other = model + "-b"
    assert store.nearest(other, (1.0, 0.0, 0.0), Scope((100,)), k=5) == []
    store.add(other, [ChunkVector(3, 11, 100, (1.0, 0.0, 0.0))])
    assert [h.chunk_id for h in store.nearest(other, (1.0, 0.0, 0.0), Scope((100,)), k=5)] == [3]
    assert store.nearest(model, (1.0, 0.0), Scope((100,)), k=5) == []  # other dimensions


def test_adding_a_chunk_again_replaces_it_and_removing_a_file_removes_its_vectors(
    chroma_url: str, model: str
) -> None:
    store = stored(chroma_url, model)
    store.add(model, [ChunkVector(3, 11, 100, (1.0, 0.0, 0.0))])
    assert store.nearest(model, (1.0, 0.0, 0.0), Scope((100,)), k=1)[0].score == pytest.approx(
        0, abs=1e-5
    )
    store.remove_file(10)
    assert [h.chunk_id for h in store.nearest(model, (1, 0, 0), Scope((100,)), k=5)] == [3]


def test_a_collection_deleted_on_the_server_is_made_again(chroma_url: str, model: str) -> None:
    store = stored(chroma_url, model)
    root = "/api/v2/tenants/default_tenant/databases/default_database/collections"
    httpx.delete(f"{chroma_url}{root}/{vector_table(model, 3)}").raise_for_status()
    store.add(model, [ChunkVector(9, 12, 100, (0.0, 0.0, 1.0))])
    assert [h.chunk_id for h in store.nearest(model, (0, 0, 1), Scope((100,)), k=5)] == [9]


def test_ts_query_is_words_only() -> None:
    assert ts_query("What is the leave policy?") == "leave | policy"
    assert ts_query("leave & !travel | (x:*) 'a' <-> b_c") == "leave | travel | x | b | c"
    assert ts_query("?!") == ""


@on_postgresql
@pytest.mark.django_db
def test_full_text_ranks_matches_within_scope_with_stemming() -> None:
    index = PostgresFullTextIndex()
    index.add(
        [
            ChunkText(1, 10, 100, "Our leave policies: thirty days of paid leave."),
            ChunkText(2, 10, 100, "Travel is booked by the office."),
            ChunkText(3, 11, 100, "Leave requests go to a manager."),
            ChunkText(4, 20, 200, "Leave policy of another team."),
        ]
    )
    hits = index.search("What is the leave policy?", Scope((100,)), k=10)
    assert [h.chunk_id for h in hits][:2] == [1, 3]  # "policy" finds "policies"
    assert {2, 4}.isdisjoint(h.chunk_id for h in hits)
    assert [h.chunk_id for h in index.search("leave", Scope((100,), (11,)), k=10)] == [3]
    index.add([ChunkText(3, 11, 100, "Requests go to a manager.")])  # replaced
    assert [h.chunk_id for h in index.search("leave", Scope((100,)), k=10)] == [1]
    index.remove_file(10)
    assert index.search("leave travel", Scope((100,)), k=10) == []


@on_postgresql
@pytest.mark.django_db
@pytest.mark.parametrize(
    "query", ['"', "leave' | 'x", "leave:*", "!leave", "leave <-> travel", "a:b", "(", ""]
)
def test_a_users_words_are_never_query_syntax(query: str) -> None:
    index = PostgresFullTextIndex()
    index.add([ChunkText(1, 10, 100, "leave travel")])
    index.search(query, Scope((100,)), k=5)  # no syntax error, whatever the words
