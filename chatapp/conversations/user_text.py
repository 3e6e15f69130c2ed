"""What the app keeps of a one-line field as typed (a title, a search): control characters
dropped and whitespace collapsed; and a message's line as a title, without its markdown.

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


# A line's markdown, as a title shows it (plain text: the header and the sidebar show a title as
# it is, so "## Plan **fast**" would show its marks until a model's title replaced it).
_BLOCK_MARKERS = re.compile(r"^\s*(?:#{1,6}(?=\s|$)|>|[-+*](?=\s)|\d{1,9}[.)](?=\s)|\[[ xX]\])\s*")
_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})")  # a code block's opening line: no words of a title
# Bounded, so that a line costs at most a pass over it times the bound: unbounded, each of a
# line's unclosed "[" or "*" scanned to its end (100,000 "[" held the server for minutes, #45).
_LINK = re.compile(r"!?\[([^\]\n]{0,300})\]\([^)\n]{0,1000}\)")
_WRAPPED = re.compile(r"(\*\*|__|~~|`)(?=\S)(.{1,300}?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)(.{1,300}?)(?<=\S)\1(?![\w*])")


def without_markdown(line: str) -> str:
    """`line` as a person reads it rendered: its block markers (`#`, `>`, `-`, `1.`), link and
    image syntax, emphasis, strike-through and code marks left out; "" for a fence's line."""
    if _FENCE.match(line):
        return ""
    previous = None
    while previous != line:
        previous, line = line, _BLOCK_MARKERS.sub("", line, count=1)
    line = _LINK.sub(r"\1", line)
    line = _WRAPPED.sub(r"\2", line)
    return _EMPHASIS.sub(r"\2", line).strip()
