"""`chatapp/knowledge/reading.py` and `chunking.py`: what a file is read as, its sections with
their pages and headings, the bounds on untrusted documents, and chunks cut at natural ends."""

from __future__ import annotations

import io
import zipfile

import docx
import pytest

from chatapp.knowledge import chunking, reading
from chatapp.knowledge.limits import CHUNK_TOKENS, MAX_CHUNKS_PER_FILE, MAX_NESTING
from chatapp.knowledge.reading import Section
from tests.pdf_bytes import pdf_bytes


def docx_bytes() -> bytes:
    document = docx.Document()
    document.add_heading("Leave policy", level=1)
    document.add_paragraph("Staff take 30 days of leave a year.")
    document.add_heading("Travel", level=1)
    document.add_paragraph("Trains are booked in second class.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Desk"
    table.rows[0].cells[1].text = "Room 4"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("a.txt", pdf_bytes("Hello"), "pdf"),
        ("notes.md", b"# Title\n\ntext", "markdown"),
        ("page.html", b"<p>hi</p>", "html"),
        ("page.txt", b"<!DOCTYPE html><p>hi</p>", "html"),
        ("readme", b"plain words", "text"),
        ("a.docx", docx_bytes(), "docx"),
        ("a.zip", b"PK\x03\x04 not really", None),
        ("a.bin", b"\x00\x01", None),
        ("latin.txt", "caf\xe9".encode("latin-1"), None),
    ],
    # Named by the file alone: a .docx's bytes hold the time it was made, so an id made of them
    # differed between xdist workers that collected a second apart, and the run stopped.
    ids=lambda value: value if isinstance(value, str) else "-",
)
def test_document_kind_is_read_off_the_bytes(name: str, data: bytes, kind: str | None) -> None:
    assert reading.document_kind(name, data) == kind


def test_pdf_pages_are_sections_with_their_numbers() -> None:
    data = pdf_bytes("First page words", "", "Third page words")
    assert reading.pdf_page_count(data) == 3
    assert reading.pdf_sections(data, 0, 3) == [
        Section("First page words", page=1),
        Section("Third page words", page=3),
    ]
    assert reading.pdf_sections(data, 2, 10) == [Section("Third page words", page=3)]
    assert reading.pdf_page_count(b"%PDF-1.4 garbage").startswith("it could not be read")


def test_markdown_sections_follow_headings_but_not_inside_code() -> None:
    text = b"intro\n\n# Setup\n\nrun it\n\n```\n# not a heading\n```\n\n## Use ##\n\ngo\n"
    assert reading.markdown_sections(text) == [
        Section("intro\n"),
        Section("\nrun it\n\n```\n# not a heading\n```\n", heading="Setup"),
        Section("\ngo\n", heading="Use"),
    ]


def test_html_gives_text_only_in_sections_at_headings() -> None:
    html = (
        b"<html><head><title>t</title><style>p{}</style></head><body>"
        b"<script>alert('x')</script><h1>Leave</h1><p>30 days <b>a year</b>.</p>"
        b"<h2>Travel <i>rules</i></h2><ul><li>trains</li><li>no taxis</li></ul></body></html>"
    )
    sections = reading.html_sections(html)
    assert sections == [
        Section("30 days a year.", heading="Leave"),
        Section("trains\n\nno taxis", heading="Travel rules"),
    ]


def test_html_nesting_is_bounded() -> None:
    deep = b"<div>" * (MAX_NESTING + 1) + b"x"
    assert reading.html_sections(deep) == f"its elements nest more than {MAX_NESTING} deep"
    assert reading.html_sections(b"<div>" * MAX_NESTING + b"x") == [Section("x")]


def test_docx_paragraphs_tables_and_headings() -> None:
    assert reading.docx_sections(docx_bytes()) == [
        Section("Staff take 30 days of leave a year.", heading="Leave policy"),
        Section("Trains are booked in second class.", heading="Travel"),
        Section("Desk | Room 4", heading="Travel"),
    ]


def test_a_docx_that_unpacks_to_too_much_is_refused_before_parsing() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\x00" * (65 * 1024 * 1024))
    assert reading.docx_sections(out.getvalue()) == "it unpacks to more than 64 MB"


def test_chunks_keep_paragraphs_whole_and_carry_their_place() -> None:
    paragraph = "A sentence of about forty characters. " * 10  # ~380 characters
    text = "\n\n".join([paragraph.strip()] * 8)
    chunks = chunking.chunked([Section(text, page=4), Section("short", heading="H")])
    size = CHUNK_TOKENS * 4
    assert all(len(c.text) <= size for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(c.text.endswith(".") for c in chunks[:-1])  # paragraphs and sentences stay whole
    assert (chunks[0].page, chunks[0].heading) == (4, "")
    assert (chunks[-1].text, chunks[-1].heading, chunks[-1].page) == ("short", "H", None)
    assert chunks[0].token_count == chunking.estimated_tokens(chunks[0].text)


def test_a_word_longer_than_a_chunk_is_cut() -> None:
    chunks = chunking.chunked([Section("x" * (CHUNK_TOKENS * 4 * 2 + 1))])
    assert [len(c.text) for c in chunks] == [CHUNK_TOKENS * 4, CHUNK_TOKENS * 4, 1]


def test_the_number_of_chunks_is_bounded() -> None:
    section = Section("word " * (CHUNK_TOKENS * (MAX_CHUNKS_PER_FILE + 1)))
    with pytest.raises(chunking.TooManyChunks, match="split it into smaller files"):
        chunking.chunked([section])
