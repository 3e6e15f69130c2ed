"""`chatapp/knowledge/ingest.py`: a file read in the render pool and embedded through the
emulator's real `/embeddings`, its state and progress on its row, every embedding call a
ledger row of its collection; failures named per file; a run left mid-file resumed where the
vectors stop; one run per file at a time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from chatapp.costs.models import Generation
from chatapp.knowledge import ingest
from chatapp.knowledge.models import Chunk, Collection, KnowledgeFile
from chatapp.knowledge.stores import vector_store
from chatapp.knowledge.stores.base import Scope
from gateway_client.emulator import EMBEDDING_MODEL
from gateway_client.emulator.embeddings import embedding_vector
from tests.pdf_bytes import pdf_bytes

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("embedding_gateway")]
State = KnowledgeFile.State

MARKDOWN = """# Leave

Staff take thirty days of paid leave a year.

# Travel

Trains are booked in second class; flights need a manager's yes.
"""


def embedding_rows() -> list[Generation]:
    return list(Generation.objects.filter(kind=Generation.Kind.EMBEDDING).order_by("pk"))


async def indexed(file: KnowledgeFile) -> KnowledgeFile:
    await ingest.index(file.pk)
    return await KnowledgeFile.objects.aget(pk=file.pk)


async def test_markdown_and_pdf_are_read_embedded_and_ready(
    handbook: Collection, added: Callable[..., KnowledgeFile], alice: Any
) -> None:
    markdown = await sync_to_async(added)(handbook, "rules.md", MARKDOWN)
    pdf = await sync_to_async(added)(
        handbook, "guide.pdf", pdf_bytes("Badges open doors", "Lunch is at noon")
    )
    assert markdown.state == State.QUEUED

    markdown = await indexed(markdown)
    pdf = await indexed(pdf)

    assert (markdown.state, markdown.done, markdown.total, markdown.error) == (
        State.READY,
        2,
        2,
        "",
    )
    assert (pdf.state, pdf.pages, pdf.done, pdf.total) == (State.READY, 2, 2, 2)
    assert (markdown.embedding_model, pdf.embedding_model) == (EMBEDDING_MODEL, EMBEDDING_MODEL)
    chunks = [
        c
        async for c in Chunk.objects.filter(file__collection=handbook).order_by(
            "file__name", "ordinal"
        )
    ]
    assert [(c.file_id, c.page, c.heading) for c in chunks] == [
        (pdf.pk, 1, ""),
        (pdf.pk, 2, ""),
        (markdown.pk, None, "Leave"),
        (markdown.pk, None, "Travel"),
    ]
    travel = chunks[3]
    vector = embedding_vector(ingest.searchable(travel.heading, travel.text))
    hits = await sync_to_async(vector_store().nearest)(
        EMBEDDING_MODEL, vector, Scope((handbook.pk,)), 1
    )
    assert hits[0].chunk_id == travel.pk
    rows = await sync_to_async(embedding_rows)()
    assert len(rows) == 2  # one call per file: each has fewer chunks than a batch
    assert {(r.collection_id, r.user_id, r.status) for r in rows} == {
        (handbook.pk, alice.pk, Generation.Status.COMPLETED)
    }


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        ("scan.pdf", pdf_bytes(""), "no text could be read from it"),
        ("broken.pdf", b"%PDF-1.4 nothing else", "it could not be read as a PDF"),
        ("deep.html", "<div>" * 300 + "x", "its elements nest more than 256 deep"),
    ],
)
async def test_a_file_that_cannot_be_read_fails_saying_why(
    handbook: Collection, added: Callable[..., KnowledgeFile], name: str, data: Any, why: str
) -> None:
    file = await indexed(await sync_to_async(added)(handbook, name, data))
    assert file.state == State.FAILED
    assert file.error.startswith(why)
    assert await Chunk.objects.filter(file=file).acount() == 0
    assert await sync_to_async(embedding_rows)() == []


async def test_a_refused_embedding_fails_the_file_with_the_limits_words(
    handbook: Collection, added: Callable[..., KnowledgeFile], alice: Any
) -> None:
    from tests.chatapp.costs.test_spending_limits import limit

    await limit("0", user=alice)
    file = await indexed(await sync_to_async(added)(handbook, "rules.md", MARKDOWN))
    assert file.state == State.FAILED
    assert "limit" in file.error
    assert await sync_to_async(embedding_rows)() == []


async def test_a_run_left_mid_embedding_goes_on_from_the_first_chunk_without_a_vector(
    handbook: Collection, added: Callable[..., KnowledgeFile], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "EMBED_BATCH", 2)
    text = "\n\n".join(f"# Part {n}\n\nThe {n}th rule is rule number {n}." for n in range(5))
    file = await indexed(await sync_to_async(added)(handbook, "parts.md", text))
    assert (file.state, file.total) == (State.READY, 5)
    assert len(await sync_to_async(embedding_rows)()) == 3

    # As a worker that stopped after two chunks leaves it, a while ago.
    await KnowledgeFile.objects.filter(pk=file.pk).aupdate(
        state=State.EMBEDDING, done=2, updated_at=timezone.now() - timedelta(hours=1)
    )
    file = await indexed(file)
    assert (file.state, file.done) == (State.READY, 5)
    rows = await sync_to_async(embedding_rows)()
    assert len(rows) == 3 + 2  # chunks 2-3 and 4: the first two were not embedded again


async def test_a_busy_file_is_claimed_by_one_run_only(
    handbook: Collection, added: Callable[..., KnowledgeFile]
) -> None:
    file = await sync_to_async(added)(handbook, "rules.md", MARKDOWN)
    await KnowledgeFile.objects.filter(pk=file.pk).aupdate(state=State.READING)  # fresh: someone's
    file = await indexed(file)
    assert file.state == State.READING
    assert await Chunk.objects.filter(file=file).acount() == 0


async def test_a_new_embedding_model_embeds_the_same_chunks_again(
    handbook: Collection, added: Callable[..., KnowledgeFile], embedding_gateway: Any
) -> None:
    from chatapp.gateways import configs
    from chatapp.knowledge.files import reembed

    file = await indexed(await sync_to_async(added)(handbook, "rules.md", MARKDOWN))
    chunks = [c.pk async for c in Chunk.objects.filter(file=file).order_by("ordinal")]
    await embedding_gateway.__class__.objects.filter(pk=embedding_gateway.pk).aupdate(
        embedding_model="emulator/embedding-large"
    )
    await sync_to_async(configs.forget_configs)()
    await sync_to_async(reembed)([file.pk])

    file = await indexed(file)
    assert (file.state, file.done, file.embedding_model) == (
        State.READY,
        2,
        "emulator/embedding-large",
    )
    assert [c.pk async for c in Chunk.objects.filter(file=file).order_by("ordinal")] == chunks
    travel = await Chunk.objects.aget(pk=chunks[1])
    vector = embedding_vector(ingest.searchable(travel.heading, travel.text))
    store = vector_store()
    scope = Scope((handbook.pk,))
    new = await sync_to_async(store.nearest)("emulator/embedding-large", vector, scope, 1)
    old = await sync_to_async(store.nearest)(EMBEDDING_MODEL, vector, scope, 1)
    assert ([h.chunk_id for h in new], old) == ([travel.pk], [])
    rows = await sync_to_async(embedding_rows)()
    assert [r.model for r in rows] == [EMBEDDING_MODEL, "emulator/embedding-large"]
