"""What the app keeps of a one-line field as typed (a title, a search): control characters
dropped and whitespace collapsed.

NUL is the one that matters: PostgreSQL cannot store it (or search for it), so it would fail the
request; the other C0 and C1 controls have no business in a one-line label either. Messages are
not cleaned like this (their text is the user's to send as written): `turns.checked_message`
refuses NUL instead, saying so.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def one_line(text: str) -> str:
    return " ".join(_CONTROLS.sub("", text).split())
