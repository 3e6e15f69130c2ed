"""What the render pool's processes run (`pool.py`): renders, and the text of an attached PDF
(`pdf_text.py`); importing it warms the renderer.

Each job is a pure function of its arguments, so a process holds nothing between jobs that
matters and can be killed at any time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from chatapp.rendering import highlight, settle_steps
from chatapp.rendering.markdown import render_markdown
from chatapp.rendering.pdf_text import PdfText
from chatapp.rendering.pdf_text import pdf_text as read_pdf_text

for _name in highlight.LEXERS:  # a new process's first code block costs no import
    highlight.lexer_for(_name)


def render(text: str, citations: Sequence[Mapping[str, object]], doc_id: str) -> str:
    return render_markdown(text, citations, doc_id=doc_id)


def settle(
    tail: str,
    context: settle_steps.OpenBlock | None,
    citations: Sequence[Mapping[str, object]],
    doc_id: str,
    final: bool,
    restyle: bool,
) -> settle_steps.Step:
    return settle_steps.settle_step(tail, context, citations, doc_id, final, restyle)


def settle_and_draft(
    lines: str,
    rest: str | None,
    context: settle_steps.OpenBlock | None,
    citations: Sequence[Mapping[str, object]],
    doc_id: str,
    restyle: bool,
) -> settle_steps.Settling:
    return settle_steps.settle_and_draft(lines, rest, context, citations, doc_id, restyle)


def pdf_text(data: bytes, max_pages: int, max_chars: int) -> PdfText | str:
    return read_pdf_text(data, max_pages, max_chars)
