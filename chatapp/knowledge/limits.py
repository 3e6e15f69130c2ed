"""What a knowledge file may be, and how the work on it is portioned (docs/configuration.md,
"Knowledge collections"). Documents are untrusted: every dimension a parser or the store could
be made to spend without end on is bounded here."""

from __future__ import annotations

from typing import Final

from chatapp.access.body_limits import MAX_KNOWLEDGE_FILE_BYTES

# The request body limits table (`access/body_limits.py`) holds the number the server refuses by.
MAX_FILE_BYTES: Final = MAX_KNOWLEDGE_FILE_BYTES
MAX_FILES_PER_COLLECTION: Final = 200
MAX_PDF_PAGES: Final = 1000
# A DOCX is a ZIP: what its parts may unpack to, and how many there may be.
MAX_UNPACKED_BYTES: Final = 64 * 1024 * 1024
MAX_ZIP_ENTRIES: Final = 2000
# How deep HTML's elements may nest (a browser's own limit is 512).
MAX_NESTING: Final = 256
MAX_CHUNKS_PER_FILE: Final = 3000
# A chunk's size, in tokens estimated as characters / 4 (`chunking.estimated_tokens`).
CHUNK_TOKENS: Final = 300

# PDF pages read per render-pool job, each job under the pool's deadline.
PDF_PAGES_PER_JOB: Final = 20
# Chunks per embedding call (one ledger generation each).
EMBED_BATCH: Final = 64

LIMITS_IN_WORDS: Final = (
    f"PDF, Markdown, text, HTML or DOCX, each up to {MAX_FILE_BYTES // 2**20} MB "
    f"(a PDF up to {MAX_PDF_PAGES:,} pages), up to {MAX_FILES_PER_COLLECTION} files a collection"
)
