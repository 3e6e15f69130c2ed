"""Indexing one knowledge file: reading it into chunks, then embedding them, its state and
progress on its row as it goes (`KnowledgeFile`).

It runs as a background task (`tasks.py`), one file per task, and may be run again for the same
file at any time: `_claim` lets one run at a time work on a file (a busy file is claimed again
only once it has made no progress for `CHAT_KNOWLEDGE_STALE_AFTER`, its worker gone), reading
starts over, and embedding goes on from the first chunk without a vector (`done`, written in
the transaction that stores the vectors; a file queued to be embedded again for a new model
keeps its chunks and is not read again). Every way it can stop ends the file `failed` with one
sentence saying why; none waits without a bound (the render pool's deadline for each reading
job, the gateway's timeouts for each embedding request).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from chatapp.gateways.clients import close_clients
from chatapp.knowledge import reading
from chatapp.knowledge.chunking import ChunkDraft, TooManyChunks, chunked
from chatapp.knowledge.embedding import (
    EmbeddingFailed,
    EmbeddingFor,
    EmbeddingRefused,
    embed_texts,
    embedding_setup,
)
from chatapp.knowledge.limits import EMBED_BATCH, MAX_PDF_PAGES, PDF_PAGES_PER_JOB
from chatapp.knowledge.models import Chunk, KnowledgeFile
from chatapp.knowledge.stores import full_text_index, vector_store
from chatapp.knowledge.stores.base import ChunkText, ChunkVector
from chatapp.rendering import pool

logger = logging.getLogger(__name__)
State = KnowledgeFile.State


class Unreadable(Exception):
    """The file cannot be indexed; the message is the sentence the page shows."""


class _Gone(Exception):
    """The file was deleted, or taken back to be indexed afresh, while this run worked on it."""


@dataclass(frozen=True, slots=True)
class _Claimed:
    pk: int
    collection_pk: int
    added_by_pk: int | None
    state: str


async def index(file_pk: int) -> None:
    """Index the file, or leave it to the run already working on it."""
    claimed = await sync_to_async(_claim)(file_pk)
    if claimed is None:
        return
    try:
        if claimed.state == State.READING:
            await _read(claimed)
        await _embed(claimed)
    except _Gone:
        return
    except (Unreadable, TooManyChunks, EmbeddingRefused, EmbeddingFailed) as exc:
        await sync_to_async(_fail)(file_pk, str(exc))
    except Exception as exc:
        logger.exception("Indexing knowledge file %s failed", file_pk)
        await sync_to_async(_fail)(
            file_pk, f"an unexpected error stopped it ({type(exc).__name__})"
        )
    finally:
        await close_clients()


def _claim(file_pk: int) -> _Claimed | None:
    now = timezone.now()
    stale = Q(updated_at__lt=now - timedelta(seconds=settings.CHAT_KNOWLEDGE_STALE_AFTER))
    files = KnowledgeFile.objects.filter(pk=file_pk)
    # Queued to be read (nothing counted yet), or left reading: read (again). Queued with its
    # chunks counted (`files.reembed`: a new embedding model), or left embedding: embed, from
    # `done` on.
    to_read = Q(state=State.QUEUED, total=0) | (Q(state=State.READING) & stale)
    to_embed = Q(state=State.QUEUED, total__gt=0) | (Q(state=State.EMBEDDING) & stale)
    with transaction.atomic():
        if not files.filter(to_read).update(
            state=State.READING, updated_at=now, error=""
        ) and not files.filter(to_embed).update(state=State.EMBEDDING, updated_at=now, error=""):
            return None
        file = files.only("pk", "collection_id", "added_by_id", "state").get()
    return _Claimed(file.pk, file.collection_id, file.added_by_id, file.state)


def _progress(file_pk: int, expected: str, /, **fields: object) -> None:
    """Write progress (and so the file's heartbeat) to a file in the `expected` state, or
    `_Gone` if it is no longer this run's: deleted, or re-queued."""
    fields.setdefault("updated_at", timezone.now())
    if not KnowledgeFile.objects.filter(pk=file_pk, state=expected).update(**fields):
        raise _Gone


def _fail(file_pk: int, why: str) -> None:
    KnowledgeFile.objects.filter(pk=file_pk).exclude(state=State.QUEUED).update(
        state=State.FAILED, error=why[:1000], updated_at=timezone.now()
    )


# --- Reading --------------------------------------------------------------------------------------


async def _read(claimed: _Claimed) -> None:
    name, data = await sync_to_async(_start_reading)(claimed.pk)
    kind = reading.document_kind(name, data)
    if kind is None:
        raise Unreadable(f"it is {reading.NOT_A_KIND}")
    count = 0
    if kind == "pdf":
        pages = _checked(await pool.run(reading.pdf_page_count, data), int)
        if pages > MAX_PDF_PAGES:
            raise Unreadable(f"it has {pages:,} pages, more than {MAX_PDF_PAGES:,}")
        await sync_to_async(_progress)(claimed.pk, State.READING, pages=pages, total=pages)
        for first in range(0, pages, PDF_PAGES_PER_JOB):
            stop = min(first + PDF_PAGES_PER_JOB, pages)
            found = _checked(await pool.run(reading.pdf_sections, data, first, stop), list)
            count += await sync_to_async(_store_chunks)(
                claimed, chunked(found, first_ordinal=count)
            )
            await sync_to_async(_progress)(claimed.pk, State.READING, done=stop)
    else:
        reader = {
            "docx": reading.docx_sections,
            "html": reading.html_sections,
            "markdown": reading.markdown_sections,
            "text": reading.text_sections,
        }[kind]
        found = _checked(await pool.run(reader, data), list)
        count = await sync_to_async(_store_chunks)(claimed, chunked(found))
    if not count:
        raise Unreadable("no text could be read from it (a scanned PDF holds only pictures)")
    await sync_to_async(_progress)(
        claimed.pk, State.READING, state=State.EMBEDDING, done=0, total=count
    )


def _checked[T](result: object, expected: type[T]) -> T:
    """A reading job's result, or `Unreadable` saying why there is none."""
    if isinstance(result, pool.Failure):
        took_long = result.kind in {"deadline", "busy"}
        raise Unreadable("reading it took too long" if took_long else "it could not be read")
    if isinstance(result, str):
        raise Unreadable(result)
    assert isinstance(result, expected)
    return result


def _start_reading(file_pk: int) -> tuple[str, bytes]:
    """Forget what an earlier reading left (chunks, vectors, text), and the file's bytes."""
    with transaction.atomic():
        vector_store().remove_file(file_pk)
        full_text_index().remove_file(file_pk)
        Chunk.objects.filter(file_id=file_pk).delete()
        _progress(file_pk, State.READING, done=0, total=0, pages=None, embedding_model="")
        file = KnowledgeFile.objects.only("name", "data").get(pk=file_pk)
    return file.name, bytes(file.data)


def searchable(heading: str, text: str) -> str:
    """What is embedded and indexed of a chunk: its heading gives a short passage its topic."""
    return f"{heading}\n\n{text}" if heading else text


def _store_chunks(claimed: _Claimed, drafts: list[ChunkDraft]) -> int:
    with transaction.atomic():
        _progress(claimed.pk, State.READING)
        made = Chunk.objects.bulk_create(
            Chunk(
                file_id=claimed.pk,
                ordinal=d.ordinal,
                text=d.text,
                page=d.page,
                heading=d.heading,
                token_count=d.token_count,
            )
            for d in drafts
        )
        full_text_index().add(
            [
                ChunkText(c.pk, claimed.pk, claimed.collection_pk, searchable(c.heading, c.text))
                for c in made
            ]
        )
    return len(made)


# --- Embedding ------------------------------------------------------------------------------------


async def _embed(claimed: _Claimed) -> None:
    file = await KnowledgeFile.objects.only("embedding_model", "embedding_gateway_id", "done").aget(
        pk=claimed.pk
    )
    setup = await sync_to_async(embedding_setup)(file.embedding_gateway_id)
    if setup is None:
        raise Unreadable("no gateway embeds text: an admin sets an embedding model on one")
    done = file.done
    if file.embedding_model != setup.model or file.embedding_gateway_id != setup.config.pk:
        # Vectors so far (if any) are another model's: start over with this one.
        await sync_to_async(_restart_embedding)(claimed.pk, setup.model, setup.config.pk)
        done = 0
    purpose = EmbeddingFor(user_pk=claimed.added_by_pk, collection_pk=claimed.collection_pk)
    while True:
        chunks = [
            chunk
            async for chunk in Chunk.objects.filter(file_id=claimed.pk, ordinal__gte=done)
            .order_by("ordinal")
            .only("pk", "text", "heading")[:EMBED_BATCH]
        ]
        if not chunks:
            break
        vectors = await embed_texts([searchable(c.heading, c.text) for c in chunks], setup, purpose)
        done += len(chunks)
        await sync_to_async(_store_vectors)(claimed, setup.model, chunks, vectors, done)
    await sync_to_async(_progress)(claimed.pk, State.EMBEDDING, state=State.READY)


def _restart_embedding(file_pk: int, model: str, gateway_pk: int) -> None:
    with transaction.atomic():
        vector_store().remove_file(file_pk)
        _progress(
            file_pk, State.EMBEDDING, done=0, embedding_model=model, embedding_gateway_id=gateway_pk
        )


def _store_vectors(
    claimed: _Claimed, model: str, chunks: list[Chunk], vectors: list[list[float]], done: int
) -> None:
    with transaction.atomic():
        _progress(claimed.pk, State.EMBEDDING, done=done)
        vector_store().add(
            model,
            [
                ChunkVector(chunk.pk, claimed.pk, claimed.collection_pk, tuple(vector))
                for chunk, vector in zip(chunks, vectors, strict=True)
            ],
        )
