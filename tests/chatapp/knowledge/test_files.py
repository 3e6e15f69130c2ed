"""`chatapp/knowledge/files.py`: adding checks a file and queues its task in one transaction;
removing a file takes its chunks, vectors and text, never a ledger row; re-indexing only a file
that is not busy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django_tasks_db.models import DBTaskResult

from chatapp.costs.models import Generation
from chatapp.knowledge import files, ingest
from chatapp.knowledge.limits import MAX_FILE_BYTES
from chatapp.knowledge.models import Chunk, Collection, KnowledgeFile
from chatapp.knowledge.stores import full_text_index, vector_store
from chatapp.knowledge.stores.base import Scope
from gateway_client.emulator import EMBEDDING_MODEL
from gateway_client.emulator.embeddings import embedding_vector

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("embedding_gateway")]
State = KnowledgeFile.State


def test_adding_a_file_queues_its_task(handbook: Collection, alice: Any) -> None:
    file = files.add_file(handbook, "../../etc/notes.md", b"# A\n\ntext", alice.pk)
    assert (file.name, file.content_type, file.size, file.state) == (
        "notes.md",
        "text/markdown",
        9,
        State.QUEUED,
    )
    (task,) = DBTaskResult.objects.all()
    assert task.task_path == "chatapp.knowledge.tasks.index_file"
    assert task.args_kwargs["args"] == [file.pk]


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (b"", "x.md is empty."),
        (b"\x89PNG\r\n\x1a\n\x00", "x.md was not added: it is not a PDF, DOCX, HTML, Markdown"),
        (b"a" * (MAX_FILE_BYTES + 1), "x.md is larger than 20 MB."),
    ],
)
def test_a_file_that_cannot_be_added_is_refused_in_words(
    handbook: Collection, alice: Any, data: bytes, refusal: str
) -> None:
    with pytest.raises(files.FileRefused, match="^" + refusal.replace(".", r"\.")):
        files.add_file(handbook, "x.md", data, alice.pk)
    assert not KnowledgeFile.objects.exists()
    assert not DBTaskResult.objects.exists()


def test_removing_a_file_removes_its_chunks_vectors_and_text_but_no_ledger_row(
    handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    file = added(handbook, "rules.md", "# Leave\n\nThirty days of leave.")
    async_to_sync(ingest.index)(file.pk)
    (chunk,) = Chunk.objects.filter(file=file)
    scope = Scope((handbook.pk,))
    vector = embedding_vector(ingest.searchable(chunk.heading, chunk.text))
    assert vector_store().nearest(EMBEDDING_MODEL, vector, scope, 5)
    assert full_text_index().search("leave", scope, 5)
    ledger = list(
        Generation.objects.filter(kind=Generation.Kind.EMBEDDING).values_list("pk", flat=True)
    )
    assert ledger

    files.remove_file(file)

    assert not Chunk.objects.exists()
    assert vector_store().nearest(EMBEDDING_MODEL, vector, scope, 5) == []
    assert full_text_index().search("leave", scope, 5) == []
    assert list(
        Generation.objects.filter(pk__in=ledger).values_list("collection_id", flat=True)
    ) == [handbook.pk]
    files.delete_collection(handbook)
    assert Generation.objects.filter(pk__in=ledger).count() == len(ledger)


def test_only_a_file_that_is_not_busy_is_indexed_again(
    handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    file = added(handbook, "rules.md", "# Leave\n\nThirty days of leave.")
    assert not files.reindex(file)  # queued: busy
    async_to_sync(ingest.index)(file.pk)
    assert files.reindex(file)
    file.refresh_from_db()
    assert (file.state, file.done, file.total) == (State.QUEUED, 0, 0)
    assert DBTaskResult.objects.count() == 2


def test_a_collection_deleted_with_its_owners_account_leaves_no_vectors(
    handbook: Collection, added: Callable[..., KnowledgeFile], alice: Any
) -> None:
    file = added(handbook, "rules.md", "# Leave\n\nThirty days of leave.")
    async_to_sync(ingest.index)(file.pk)
    (chunk,) = Chunk.objects.filter(file=file)
    scope = Scope((handbook.pk,))
    vector = embedding_vector(ingest.searchable(chunk.heading, chunk.text))
    assert vector_store().nearest(EMBEDDING_MODEL, vector, scope, 5)

    alice.delete()  # as the admin deletes an account: its collections go by cascade

    assert not KnowledgeFile.objects.exists()
    assert vector_store().nearest(EMBEDDING_MODEL, vector, scope, 5) == []
    assert full_text_index().search("leave", scope, 5) == []
    assert Generation.objects.filter(kind=Generation.Kind.EMBEDDING).exists()  # the ledger stays
