"""How large a request body each route accepts: one table, read by the server and by nginx.

A body is refused by its size while it arrives, before Django reads or parses any of it
(`patches/daphne_bodies.py`): a sign-in form needs a few hundred bytes, a message with its files
a few megabytes, and any other form what Django's own `DATA_UPLOAD_MAX_MEMORY_SIZE` lets through.
Without a bound, an anonymous 50 MB post to the sign-in page took a server from 272 to 854 MB
(issue 37).

nginx refuses the same sizes at the same paths (`deploy/nginx/site.conf` and the cluster's
`deploy/nginx.py`); `tests/deploy/test_nginx_body_limits.py` reads both and compares them with
this table. A `pattern` is written as nginx's `location ~` reads it, and matched here against the
request's path, decoded as Django routes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Final

__all__ = [
    "BODY_LIMITS",
    "FORM",
    "MAX_FORM_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_MESSAGE_UPLOAD_BYTES",
    "BodyLimit",
    "limit_for",
    "refusal",
    "size_words",
]

# The sizes the routes below are built from, kept here, under the table, so that the pages that
# take them (`conversations/uploads.py`, `conversations/importing.py`) and the server that refuses
# a larger body read one number.
MAX_MESSAGE_UPLOAD_BYTES: Final = 5 * 1024 * 1024  # a message's files, all together
MAX_FORM_BYTES: Final = 1024 * 1024  # what a message's form may add to its files (its text)
MAX_IMPORT_BYTES: Final = 20 * 1024 * 1024  # parsed, a file takes several times this in memory

# A knowledge file (`knowledge/limits.py` reads it here, below the pages that take it).
MAX_KNOWLEDGE_FILE_BYTES: Final = 20 * 1024 * 1024

# The multipart framing around a message's files and fields, and room for a selection a little
# past the caps: the composer then says what is too large (`views.chat`), not a bare 413.
MESSAGE_SLACK: Final = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BodyLimit:
    pattern: str  # a regular expression on the path, as nginx's `location ~` reads it
    max_bytes: int
    what: str  # what the route takes, for the refusal: "a sign-in form"

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern)


BODY_LIMITS: Final = (
    BodyLimit(
        r"^/c/(new|[0-9]+)/send/$",
        MAX_MESSAGE_UPLOAD_BYTES + MAX_FORM_BYTES + MESSAGE_SLACK,
        "a message with its files",
    ),
    BodyLimit(r"^/(accounts|admin)/login/$", 64 * 1024, "a sign-in form"),
    # An export file to import, and its form's framing (`views/importing.py`).
    BodyLimit(r"^/import/$", MAX_IMPORT_BYTES + 1024 * 1024, "an export file to import"),
    # Files added to a knowledge collection, and their form's framing (`views/knowledge.py`).
    BodyLimit(
        r"^/knowledge/[0-9]+/files/$", MAX_KNOWLEDGE_FILE_BYTES + 1024 * 1024, "files to add"
    ),
)
# Every other route: above Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB), which refuses a larger
# form, only later. A message's 100,000 characters, percent-encoded, take at most 1.2 MB.
FORM: Final = BodyLimit("", 3 * 1024 * 1024, "a form")


def size_words(size: int) -> str:
    """A size as a person reads it: "812 bytes", "12.4 KB", "3.1 MB"."""
    if size < 1024:
        return f"{size:,} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def limit_for(path: str) -> BodyLimit:
    """The limit on a body posted to `path` (decoded, without the query string)."""
    for limit in BODY_LIMITS:
        if limit.regex.search(path):
            return limit
    return FORM


def refusal(limit: BodyLimit, size: int | None) -> str:
    """What a 413 says: the cap in words, and the size when the headers gave it."""
    sent = "" if size is None else f" This one is {size_words(size)}."
    return (
        f"This request is too large: the server accepts at most {size_words(limit.max_bytes)} "
        f"for {limit.what}.{sent}\n"
    )
