"""Sections cut into chunks: the passages that are embedded, searched and cited.

A chunk holds about `CHUNK_TOKENS` tokens of one section (so it has one page or heading) and
ends at a paragraph's end where it can, else at a sentence's, else at a word's: a passage reads
as text, not as a window cut mid-word. Tokens are estimated (4 characters each), as nothing
here knows the embedding model's tokenizer; the estimate is what the context's budget counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from chatapp.knowledge.limits import CHUNK_TOKENS, MAX_CHUNKS_PER_FILE
from chatapp.knowledge.reading import Section

_CHARS_PER_TOKEN = 4
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunk before it is stored: `Chunk`'s fields but its file."""

    ordinal: int
    text: str
    page: int | None
    heading: str
    token_count: int


class TooManyChunks(Exception):
    """More text than `MAX_CHUNKS_PER_FILE` chunks hold."""

    def __str__(self) -> str:
        return (
            f"it holds more text than {MAX_CHUNKS_PER_FILE:,} passages "
            f"(about {MAX_CHUNKS_PER_FILE * CHUNK_TOKENS * _CHARS_PER_TOKEN // 1000:,} thousand "
            "characters): split it into smaller files"
        )


def estimated_tokens(text: str) -> int:
    return max(1, -(-len(text) // _CHARS_PER_TOKEN))


def chunked(sections: Sequence[Section], *, first_ordinal: int = 0) -> list[ChunkDraft]:
    """The chunks of `sections`, numbered from `first_ordinal`; `TooManyChunks` past the cap."""
    chunks: list[ChunkDraft] = []
    for section in sections:
        for text in _pieces(section.text, CHUNK_TOKENS * _CHARS_PER_TOKEN):
            if first_ordinal + len(chunks) >= MAX_CHUNKS_PER_FILE:
                raise TooManyChunks
            chunks.append(
                ChunkDraft(
                    first_ordinal + len(chunks),
                    text,
                    section.page,
                    section.heading,
                    estimated_tokens(text),
                )
            )
    return chunks


def _pieces(text: str, size: int) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, whole paragraphs together where they fit."""
    current = ""
    for paragraph in _units(text, size):
        if current and len(current) + 2 + len(paragraph) > size:
            yield current
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        yield current


def _units(text: str, size: int) -> Iterator[str]:
    """Paragraphs; one too long is cut at its sentences, and a sentence too long at words."""
    for paragraph in _PARAGRAPHS.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= size:
            yield paragraph
            continue
        current = ""
        for sentence in _SENTENCE_END.split(paragraph):
            for part in _cut(sentence, size):
                if current and len(current) + 1 + len(part) > size:
                    yield current
                    current = ""
                current = f"{current} {part}" if current else part
        if current:
            yield current


def _cut(sentence: str, size: int) -> Iterator[str]:
    """A sentence in pieces of at most `size` characters, at spaces where there are any."""
    while len(sentence) > size:
        cut = sentence.rfind(" ", 0, size + 1)
        cut = cut if cut > 0 else size
        yield sentence[:cut]
        sentence = sentence[cut:].lstrip()
    if sentence:
        yield sentence
