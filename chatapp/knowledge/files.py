"""What a user does to a collection's files: add one (checked, then queued for indexing), remove
one (its chunks, vectors and text with it; never a ledger row: an embedding generation points
at the collection, and outlives the file), index one again (or only embed it again, for a new
embedding model), and delete a whole collection.

Each change and the task it needs are one transaction (`tasks.index_file` is a row of the same
database), so a file is never queued without its task, nor a task left for a file rolled back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from chatapp.errors import ChatAppError
from chatapp.knowledge import reading
from chatapp.knowledge.limits import MAX_FILE_BYTES, MAX_FILES_PER_COLLECTION
from chatapp.knowledge.models import Collection, KnowledgeFile
from chatapp.knowledge.stores import full_text_index, vector_store
from chatapp.knowledge.tasks import index_file
from chatapp.rendering.attachments import safe_filename

State = KnowledgeFile.State


class FileRefused(ChatAppError, ValueError):
    """A file that cannot be added; the message says which and why, for the page."""


def add_file(collection: Collection, name: str, data: bytes, user_pk: int | None) -> KnowledgeFile:
    """Keep the file in the collection, queued for indexing; `FileRefused` if it cannot be."""
    filename = safe_filename(name, "document")
    if not data:
        raise FileRefused(f"{filename} is empty.")
    if len(data) > MAX_FILE_BYTES:
        raise FileRefused(f"{filename} is larger than {MAX_FILE_BYTES // 2**20} MB.")
    kind = reading.document_kind(filename, data)
    if kind is None:
        raise FileRefused(f"{filename} was not added: it is {reading.NOT_A_KIND}.")
    with transaction.atomic():
        if collection.files.count() >= MAX_FILES_PER_COLLECTION:
            raise FileRefused(
                f"{collection.name} holds {MAX_FILES_PER_COLLECTION} files, as many as it may."
            )
        file = KnowledgeFile.objects.create(
            collection=collection,
            added_by_id=user_pk,
            name=filename,
            content_type=reading.CONTENT_TYPES[kind],
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            data=data,
        )
        index_file.enqueue(file.pk)
    return file


def remove_file(file: KnowledgeFile) -> None:
    """The file, its chunks, vectors and text, gone; a run working on it stops at its next step."""
    with transaction.atomic():
        _forget(file.pk)
        file.delete()


def _forget(file_pk: int) -> None:
    vector_store().remove_file(file_pk)
    full_text_index().remove_file(file_pk)


def forget_collection(sender: object, instance: Collection, **kwargs: object) -> None:
    """A collection's files' vectors and text leave the stores before it goes, however it goes:
    on its page, in the admin, or with its owner's account (`pre_delete`, connected in
    `apps.py`). On the collection, not on each file: a receiver on `KnowledgeFile` would have
    Django's delete load every file's bytes to send it."""
    for file_pk in KnowledgeFile.objects.filter(collection=instance).values_list("pk", flat=True):
        _forget(file_pk)


def reindex(file: KnowledgeFile) -> bool:
    """Queue a file that is not busy to be read and embedded afresh; whether it was."""
    with transaction.atomic():
        queued = KnowledgeFile.objects.filter(
            pk=file.pk, state__in=[State.READY, State.FAILED]
        ).update(state=State.QUEUED, done=0, total=0, error="", updated_at=timezone.now())
        if queued:
            index_file.enqueue(file.pk)
    return bool(queued)


def reembed(file_pks: Sequence[int]) -> None:
    """Queue files to be embedded again with their gateway's model now (the admin changed it),
    keeping their chunks: a queued file with chunks counted (`total`) is not read again
    (`ingest._claim`); one never read is read first."""
    with transaction.atomic():
        KnowledgeFile.objects.filter(pk__in=file_pks).update(
            state=State.QUEUED, done=0, error="", updated_at=timezone.now()
        )
        for pk in file_pks:
            index_file.enqueue(pk)


def delete_collection(collection: Collection) -> None:
    """The collection and its files (their vectors and text with them: `forget_collection`)."""
    collection.delete()
