"""A passage: a chunk found for a question, as the chat side puts it in the context and cites
it ([1] linking to the file's name, its page or heading, and the passage's text).

`score` is the fused rank score (reciprocal rank fusion, `retrieval.py`): higher is more
relevant, comparable only among the passages of one retrieval.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Passage:
    chunk_id: int
    file_id: int
    file_name: str
    # The PDF page it is on (1-based), None for a document without pages.
    page: int | None
    # The heading it falls under ("" when none), for Markdown, HTML and DOCX.
    heading: str
    text: str
    score: float
