"""Files attached to a message, through Django's async test client and the real emulator: what
is refused and why, what is stored, who may fetch it, and what the gateway receives on the first
turn and on later ones; and the prompt tokens counted for them."""

from __future__ import annotations

import asyncio
import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations import uploads
from chatapp.conversations.models import Conversation, Upload
from chatapp.costs.costing import IMAGE_PROMPT_TOKENS, counted_prompt_tokens
from chatapp.costs.models import Generation, SpendingLimit
from chatapp.gateways import configs
from chatapp.gateways.units import CostUnit
from chatapp.rendering import pool, pool_jobs
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorURL
from gateway_client.emulator.media import png_b64
from tests.emulator_requests import record_chat_bodies
from tests.pdf_bytes import pdf_bytes

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
PNG = base64.b64decode(png_b64("upload test"))
# What a file's bytes say it is: `static/chatapp/attach_rules.js` passes them too.
KINDS = json.loads(
    (Path(__file__).resolve().parents[2] / "vectors" / "uploads" / "content_kinds.json").read_text()
)


@pytest.fixture
def received(emulator_url: EmulatorURL, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    return record_chat_bodies(emulator_url.app, monkeypatch)


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


def file(name: str, data: bytes, media_type: str = "application/octet-stream") -> Any:
    return SimpleUploadedFile(name, data, content_type=media_type)


async def post(client: AsyncClient, model: str, *files: Any, url: str = "") -> Any:
    data: dict[str, Any] = {"content": "Look at these", "model": model, "files": list(files)}
    return await client.post(url or reverse("chat:send_new"), data, headers=HTMX)


async def test_an_image_and_a_pdf_are_stored_and_sent_as_parts(
    alice: Any, received: list[dict[str, Any]], emulator_url: EmulatorURL
) -> None:
    client = await logged_in(alice)
    pdf = pdf_bytes("The lighthouse report", "Page two")
    response = await post(
        client,
        "emulator/vision",
        file("cat.jpg", PNG, "image/jpeg"),  # the bytes say PNG: they are believed, not the label
        file("report.pdf", pdf, "application/pdf"),
        file("notes.md", b"# Notes\nsome text", "text/markdown"),
    )
    assert response.status_code == 200
    await workers_finished()
    stored = [u async for u in Upload.objects.order_by("position")]
    assert [(u.kind, u.filename, u.media_type, u.size) for u in stored] == [
        ("image", "cat.jpg", "image/png", len(PNG)),
        ("document", "report.pdf", "application/pdf", len(pdf)),
        ("document", "notes.md", "text/markdown", 17),
    ]
    assert (stored[1].pages, stored[1].pages_read) == (2, 2)
    assert stored[1].text == "The lighthouse report\n\nPage two"
    (body,) = received
    parts = body["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "Look at these"}
    assert parts[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    }
    assert parts[2]["text"].startswith("Attached file report.pdf (PDF, 2 pages, ")
    assert parts[2]["text"].endswith("The lighthouse report\n\nPage two")
    assert parts[3]["text"].startswith("Attached file notes.md (text/markdown, 17 bytes):")
    record = emulator_url.app.records.latest(scenario="vision")
    assert record is not None
    assert record.parts is not None
    assert [p["type"] for p in record.parts] == ["text", "image_url", "text", "text"]
    assert record.parts[1] == {"type": "image_url", "media_type": "image/png", "bytes": len(PNG)}


async def test_later_turns_send_the_files_again(alice: Any, received: list[dict[str, Any]]) -> None:
    client = await logged_in(alice)
    await post(client, "emulator/vision", file("a.png", PNG), file("b.txt", b"plain words"))
    await workers_finished()
    conversation = await Conversation.objects.aget()
    url = reverse("chat:send", args=[conversation.pk])
    await client.post(url, {"content": "and now?", "model": "emulator/vision"}, headers=HTMX)
    await workers_finished()
    await client.post(url, {"content": "in words", "model": "emulator/echo"}, headers=HTMX)
    await workers_finished()
    first, again, text_model = (body["messages"] for body in received)
    assert again[0]["content"] == first[0]["content"]  # image and text part, sent again
    assert again[-1]["content"] == "and now?"  # a message without files is a string, as before
    # A model without image input gets a line in the image's place; the document goes as text.
    image_line = text_model[0]["content"][1]
    assert image_line["type"] == "text"
    assert "a.png (PNG image" in image_line["text"]
    assert "not sent: this model does not take images" in image_line["text"]
    assert text_model[0]["content"][2] == first[0]["content"][2]


@pytest.mark.parametrize(
    ("files", "words"),
    [
        (
            [("x.bin", b"\x00\x01\x02")],
            "x.bin was not attached: it is not a PNG, JPEG, GIF or WebP",
        ),
        ([("big.txt", b"a" * (uploads.MAX_UPLOAD_BYTES + 1))], "big.txt is 4.0 MB: a file may be"),
        ([(f"f{n}.txt", b"x") for n in range(6)], "At most 5 files can be attached"),
        ([("bad.pdf", b"%PDF-1.4 not really")], "bad.pdf was not attached: it could not be read"),
        ([("empty.pdf", pdf_bytes(""))], "no text could be read from it"),
        ([("a.png", PNG)], "emulator/chat does not take images (a.png)"),
    ],
)
async def test_refused_files_are_said_in_words_and_nothing_is_sent(
    alice: Any, received: list[dict[str, Any]], files: list[tuple[str, bytes]], words: str
) -> None:
    client = await logged_in(alice)
    response = await post(client, "emulator/chat", *(file(n, d) for n, d in files))
    assert response.headers["HX-Retarget"] == "#composer-error"
    assert words in response.content.decode()
    assert received == []
    assert not await Conversation.objects.aexists()


@pytest.mark.parametrize("vector", KINDS["vectors"], ids=lambda vector: vector["about"])
def test_what_a_files_bytes_say_it_is(vector: dict[str, Any]) -> None:
    assert uploads.content_kind(bytes.fromhex(vector["hex"])) == vector["kind"]


async def test_a_file_of_no_kind_taken_is_refused_in_the_words_the_composer_uses() -> None:
    with pytest.raises(uploads.UploadRefused) as refused:
        await uploads.checked_uploads([("setup.exe", b"MZ\x90\x00\x03\x00")])
    assert str(refused.value) == f"setup.exe was not attached: it is {KINDS['refused_words']}."


async def test_a_file_is_served_to_its_owner_only(alice: Any, bob: Any) -> None:
    client = await logged_in(alice)
    await post(client, "emulator/vision", file("a.png", PNG), file("n.md", b"<b>hi</b>"))
    await workers_finished()
    image, document = [
        u async for u in Upload.objects.select_related("message").order_by("position")
    ]
    shown = await client.get(reverse("chat:upload", args=[image.pk]))
    assert (shown.status_code, shown["Content-Type"], shown.content) == (200, "image/png", PNG)
    assert shown["Content-Disposition"].startswith("inline;")  # opens in a tab, not a download
    got = await client.get(reverse("chat:upload", args=[document.pk]))
    assert got["Content-Type"] == "text/plain; charset=utf-8"
    assert got["Content-Disposition"].startswith("attachment;")
    assert got["X-Content-Type-Options"] == "nosniff"
    assert got["Content-Security-Policy"] == "default-src 'none'; sandbox"
    # The user's own files: kept by no cache, not even the browser's disk (`NoStore`).
    assert (shown["Cache-Control"], got["Cache-Control"]) == ("no-store", "no-store")
    other = await logged_in(bob)
    assert (await other.get(reverse("chat:upload", args=[image.pk]))).status_code == 404
    page = await client.get(reverse("chat:conversation", args=[image.message.conversation_id]))
    html = page.content.decode()
    assert f'src="{reverse("chat:upload", args=[image.pk])}"' in html
    assert "n.md (text/markdown, 9 bytes)" in html


async def test_exports_keep_the_files(alice: Any) -> None:
    client = await logged_in(alice)
    await post(client, "emulator/vision", file("a.png", PNG), file("n.md", b"note"))
    await workers_finished()
    conversation = await Conversation.objects.aget()
    data = (await client.get(reverse("chat:export_json", args=[conversation.pk]))).json()
    question = data["messages"][0]
    assert [(f["filename"], f["bytes"]) for f in question["files"]] == [
        ("a.png", len(PNG)),
        ("n.md", 4),
    ]
    assert question["files"][1]["text"] == "note"
    assert "data" not in question["files"][0]  # described, as the answers' attachments are
    markdown = (await client.get(reverse("chat:export_markdown", args=[conversation.pk]))).content
    assert "- a.png (PNG image, " in markdown.decode()


def test_prompt_tokens_count_text_parts_and_each_image() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "abcd" * 10},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + "A" * 40_000},
                },
            ],
        },
        {"role": "assistant", "content": "abcd"},
    ]
    # The text (41 characters with the newline between messages: 11 tokens), and one image.
    assert counted_prompt_tokens(messages) == 12 + IMAGE_PROMPT_TOKENS


@pytest.mark.parametrize("limit", ["answers", "spending", None])
async def test_a_user_at_a_limit_is_refused_before_a_pdf_is_read(
    alice: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, limit: str | None
) -> None:
    """A PDF is read in a render process for up to seconds: not for a send that is refused."""
    read: list[Any] = []
    run = pool.run

    async def spied(job: Any, *args: Any) -> Any:
        if job is pool_jobs.pdf_text:  # not the answer's render jobs
            read.append(args)
        return await run(job, *args)

    monkeypatch.setattr(pool, "run", spied)
    gateway_pk = (await configs.aconfigs())[1]
    if limit == "answers":
        settings.CHAT_GENERATIONS_PER_MINUTE = 1
    if limit is not None:
        await Generation.objects.acreate(
            user=alice,
            gateway_id=gateway_pk,
            model="emulator/chat",
            status=Generation.Status.COMPLETED,
            cost=Decimal(1),
            cost_unit=CostUnit.USD,
            cost_source=Generation.CostSource.STREAM,  # settled: counted by the totals
        )
    if limit == "spending":
        await SpendingLimit.objects.acreate(amount=Decimal(1), unit=CostUnit.USD)
    client = await logged_in(alice)

    response = await post(client, "emulator/chat", file("report.pdf", pdf_bytes("The report")))

    if limit is None:  # the control: the same post, by a user at no limit, reads the PDF
        assert len(read) == 1
        assert response.headers["HX-Retarget"] == "main.chat"  # the new conversation
        await workers_finished()
        return
    assert read == []
    assert response.headers["HX-Retarget"] == "#composer-error"
    said = response.content.decode()
    assert ("most allowed" if limit == "answers" else "is used up") in said
