"""A knowledge file's text, as sections that know their page or heading (`Section`).

What a file is comes from its bytes first: `%PDF-` is a PDF and a ZIP holding
`word/document.xml` a DOCX, whatever the name says; otherwise UTF-8 text, read as HTML or
Markdown when its name says so (or, for HTML, when it starts like HTML), else as plain text.

The readers are pure functions that run as render-pool jobs (`rendering/pool.py`): a document
is untrusted, and its parse may be slow or hungry, so it runs in a process that is killed at
the pool's deadline and held to its memory limit. A PDF is read a range of pages per job, so a
long one is many short jobs and its progress shows. A reader returns why it cannot read a file,
in words, instead of raising: that sentence is the file's error on the page. HTML gives its text
only; nothing in any document is followed, fetched or run.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Literal

from chatapp.knowledge.limits import MAX_NESTING, MAX_UNPACKED_BYTES, MAX_ZIP_ENTRIES

type Kind = Literal["pdf", "docx", "html", "markdown", "text"]

CONTENT_TYPES: dict[Kind, str] = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "markdown": "text/markdown",
    "text": "text/plain",
}
NOT_A_KIND = "not a PDF, DOCX, HTML, Markdown or text file (UTF-8)"
_HEADING_CHARS = 300


@dataclass(frozen=True, slots=True)
class Section:
    """A run of a document's text under one page (PDF) or one heading (the others)."""

    text: str
    page: int | None = None
    heading: str = ""


def document_kind(name: str, data: bytes) -> Kind | None:
    """What `data` is read as, or None for what cannot be."""
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, ValueError):
            return None
        return "docx" if "word/document.xml" in names else None
    if b"\x00" in data:
        return None
    try:
        head = data[:512].decode("utf-8-sig", errors="strict").lstrip().lower()
    except UnicodeDecodeError:
        # A multibyte character cut at 512 is not an error; the whole file is checked below.
        head = data[:512].decode("utf-8-sig", errors="ignore").lstrip().lower()
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    extension = name.rpartition(".")[2].lower() if "." in name else ""
    if extension in {"html", "htm", "xhtml"} or head.startswith(("<!doctype html", "<html")):
        return "html"
    if extension in {"md", "markdown"}:
        return "markdown"
    return "text"


# --- PDF ------------------------------------------------------------------------------------------


def pdf_page_count(data: bytes) -> int | str:
    """How many pages the PDF has, or why it cannot be read."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "it is encrypted with a password"
        return len(reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError) as exc:
        return f"it could not be read as a PDF ({type(exc).__name__})"


def pdf_sections(data: bytes, first: int, stop: int) -> list[Section] | str:
    """The text of pages `first` to `stop` - 1 (0-based), one section per page with text."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "it is encrypted with a password"
        sections = []
        for number in range(first, min(stop, len(reader.pages))):
            text = (reader.pages[number].extract_text() or "").replace("\x00", "").strip()
            if text:
                sections.append(Section(text, page=number + 1))
        return sections
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError) as exc:
        return f"it could not be read as a PDF ({type(exc).__name__})"


# --- Text, Markdown -------------------------------------------------------------------------------

_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def text_sections(data: bytes) -> list[Section]:
    return [Section(data.decode("utf-8-sig"))]


def markdown_sections(data: bytes) -> list[Section]:
    """Sections that start at each ATX heading (`# Title`) outside fenced code."""
    sections: list[Section] = []
    lines: list[str] = []
    heading, fence = "", ""
    for line in data.decode("utf-8-sig").split("\n"):
        if fence:
            if line.strip().startswith(fence):
                fence = ""
        elif found := _FENCE.match(line):
            fence = found.group(1)[0] * 3
        elif found := _ATX_HEADING.match(line):
            sections.append(Section("\n".join(lines), heading=heading))
            heading, lines = found.group(1)[:_HEADING_CHARS], []
            continue
        lines.append(line)
    sections.append(Section("\n".join(lines), heading=heading))
    return [s for s in sections if s.text.strip()]


# --- HTML -----------------------------------------------------------------------------------------

_SKIPPED = {"script", "style", "template", "noscript", "head", "svg", "math"}
_VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
}  # fmt: skip
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_BLOCKS = {"p", "div", "li", "tr", "br", "section", "article", "blockquote", "pre", "table", "dd"}


class _TooDeep(Exception):
    pass


class _HtmlText(HTMLParser):
    """The text of an HTML document, cut into sections at its headings."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self.heading = ""
        self.parts: list[str] = []
        self.heading_parts: list[str] | None = None
        self.depth = 0
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if tag == "br":
                self.parts.append("\n")
            return
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _TooDeep
        if tag in _SKIPPED or self.skipping:
            self.skipping += 1
        elif tag in _HEADINGS:
            self._section()
            self.heading_parts = []
        elif tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        self.depth = max(0, self.depth - 1)
        if self.skipping:
            self.skipping -= 1
        elif tag in _HEADINGS and self.heading_parts is not None:
            self.heading = " ".join("".join(self.heading_parts).split())[:_HEADING_CHARS]
            self.heading_parts = None
        elif tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        (self.heading_parts if self.heading_parts is not None else self.parts).append(data)

    def _section(self) -> None:
        text = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+", " ", "".join(self.parts))).strip()
        if text:
            self.sections.append(Section(text, heading=self.heading))
        self.parts = []

    def finish(self) -> list[Section]:
        self.close()
        self._section()
        return self.sections


def html_sections(data: bytes) -> list[Section] | str:
    parser = _HtmlText()
    try:
        parser.feed(data.decode("utf-8-sig"))
        return parser.finish()
    except _TooDeep:
        return f"its elements nest more than {MAX_NESTING} deep"


# --- DOCX -----------------------------------------------------------------------------------------


def docx_sections(data: bytes) -> list[Section] | str:
    """Paragraphs and table cells, in sections at each paragraph styled as a heading."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError) as exc:
        return f"it could not be read as a DOCX ({type(exc).__name__})"
    if len(entries) > MAX_ZIP_ENTRIES:
        return f"it holds more than {MAX_ZIP_ENTRIES:,} parts"
    if sum(entry.file_size for entry in entries) > MAX_UNPACKED_BYTES:
        return f"it unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MB"
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # a missing part, lxml's syntax errors: an untrusted file's faults
        return f"it could not be read as a DOCX ({type(exc).__name__})"
    sections: list[Section] = []
    lines: list[str] = []
    heading = ""
    for paragraph in document.paragraphs:
        style = paragraph.style.name if paragraph.style is not None else ""
        if style and (style.startswith("Heading") or style == "Title"):
            sections.append(Section("\n\n".join(lines), heading=heading))
            heading, lines = paragraph.text.strip()[:_HEADING_CHARS], []
        elif paragraph.text.strip():
            lines.append(paragraph.text)
    sections.append(Section("\n\n".join(lines), heading=heading))
    for table in document.tables:
        rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows]
        sections.append(Section("\n".join(rows), heading=heading))
    return [s for s in sections if s.text.strip()]
