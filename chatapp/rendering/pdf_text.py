"""The text of a PDF a user attached, read with pypdf within a page and character cap.

It runs as a render pool job (`pool_jobs.pdf_text`), never in the server's process: a PDF is
untrusted input whose parse can take long or much memory, and the pool kills a job at its
deadline and holds each process to its memory limit. A PDF that cannot be read gives the reason
in words, for the composer's refusal.
"""

from __future__ import annotations

import io
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PdfText:
    """What was read: `text` from the first `pages_read` of `pages` pages, `cut` when the
    character cap stopped it short of the text of those pages."""

    text: str
    pages: int
    pages_read: int
    cut: bool


def pdf_text(data: bytes, max_pages: int, max_chars: int) -> PdfText | str:
    """The text of the PDF `data` (its first `max_pages` pages, at most `max_chars`
    characters), or why it cannot be read."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "it is encrypted with a password"
        pages = len(reader.pages)
        texts: list[str] = []
        length, read, cut = 0, 0, False
        for page in reader.pages[:max_pages]:
            text = (page.extract_text() or "").replace("\x00", "").strip()
            read += 1
            if text:
                texts.append(text)
                length += len(text) + 2
            if length > max_chars:
                cut = True
                break
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError) as exc:
        return f"it could not be read as a PDF ({type(exc).__name__})"
    joined = "\n\n".join(texts)
    if not joined.strip():
        return "no text could be read from it (a scanned PDF holds only pictures of pages)"
    return PdfText(joined[:max_chars], pages, read, cut or len(joined) > max_chars)
