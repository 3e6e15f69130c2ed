"""`chatapp/knowledge/stores/sqlite.py` on real sqlite-vec and FTS5: searches stay within the
collections and files they are given, a file's vectors and text go with it, and a user's words
are never FTS5 syntax."""

from __future__ import annotations

import pytest

from chatapp.knowledge.stores.base import ChunkText, ChunkVector, Scope
from chatapp.knowledge.stores.sqlite import (
    SqliteFullTextIndex,
    SqliteVectorStore,
    match_expression,
)

pytestmark = pytest.mark.django_db

# chunk id: (file, collection, vector)
VECTORS = {
    1: (10, 100, (1.0, 0.0, 0.0)),
    2: (10, 100, (0.9, 0.1, 0.0)),
    3: (11, 100, (0.0, 1.0, 0.0)),
    4: (20, 200, (1.0, 0.0, 0.0)),  # another collection: as close as chunk 1
}


def stored() -> SqliteVectorStore:
    store = SqliteVectorStore()
    store.add(
        "m1",
        [
            ChunkVector(chunk, file, collection, vector)
            for chunk, (file, collection, vector) in VECTORS.items()
        ],
    )
    return store


def test_nearest_is_within_the_collections_given() -> None:
    store = stored()
    hits = store.nearest("m1", (1.0, 0.0, 0.0), Scope((100,)), k=10)
    assert [h.chunk_id for h in hits] == [1, 2, 3]
    assert hits[0].score > hits[1].score > hits[2].score
    assert [h.chunk_id for h in store.nearest("m1", (1.0, 0.0, 0.0), Scope((100, 200)), k=2)] in (
        [1, 4],
        [4, 1],
    )
    assert [h.chunk_id for h in store.nearest("m1", (1, 0, 0), Scope((100,), (11,)), k=5)] == [3]
    assert store.nearest("m1", (1, 0, 0), Scope(()), k=5) == []
    assert store.nearest("m1", (1, 0, 0), Scope((100,), ()), k=5) == []


def test_models_are_kept_apart() -> None:
    store = stored()
    assert store.nearest("m2", (1.0, 0.0, 0.0), Scope((100,)), k=5) == []
    store.add("m2", [ChunkVector(3, 11, 100, (1.0, 0.0, 0.0))])
    assert [h.chunk_id for h in store.nearest("m2", (1.0, 0.0, 0.0), Scope((100,)), k=5)] == [3]
    # Same model name, other dimensions: another table, never compared.
    assert store.nearest("m1", (1.0, 0.0), Scope((100,)), k=5) == []


def test_adding_a_chunk_again_replaces_it_and_removing_a_file_removes_its_vectors() -> None:
    store = stored()
    store.add("m1", [ChunkVector(3, 11, 100, (1.0, 0.0, 0.0))])
    store.add("m2", [ChunkVector(1, 10, 100, (0.5, 0.5, 0.0))])
    assert store.nearest("m1", (1.0, 0.0, 0.0), Scope((100,)), k=1)[0].score == pytest.approx(0)
    store.remove_file(10)
    assert [h.chunk_id for h in store.nearest("m1", (1, 0, 0), Scope((100,)), k=5)] == [3]
    assert store.nearest("m2", (1, 0, 0), Scope((100,)), k=5) == []


def test_full_text_ranks_matches_within_scope_with_stemming() -> None:
    index = SqliteFullTextIndex()
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
    index.remove_file(10)
    assert [h.chunk_id for h in index.search("leave travel", Scope((100,)), k=10)] == [3]


@pytest.mark.parametrize(
    "query", ['"', 'leave" OR "x', "NEAR(leave travel)", "leave*", "-leave", "^leave", "a:b", ""]
)
def test_a_users_words_are_never_query_syntax(query: str) -> None:
    index = SqliteFullTextIndex()
    index.add([ChunkText(1, 10, 100, "leave travel")])
    index.search(query, Scope((100,)), k=5)  # no syntax error, whatever the words


def test_match_expression_quotes_each_word_once() -> None:
    assert match_expression('Leave, "leave" & travel?') == '"leave" OR "travel"'
    assert match_expression("?!") == ""
