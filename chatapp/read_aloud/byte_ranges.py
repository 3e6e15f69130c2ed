"""Byte ranges (RFC 9110 §14) of a stored read aloud, so that the player can seek in it.

Chromium treats a media response without `Accept-Ranges` as a stream it cannot seek in (its
`seekable` is empty even once every byte is in), so a completed read aloud played again is
served whole to a request without `Range`, and as the one range asked for to one with it. Only
a single range is answered; several in one header (a multipart answer no player asks for) or a
header that does not parse get the whole body, which the RFC allows.
"""

from __future__ import annotations

import re

__all__ = ["Unsatisfiable", "requested_range"]

# At most 18 digits each: a longer number is no byte of ours (and past 4,300 digits `int` raises).
_RANGE = re.compile(r"bytes=(\d{0,18})-(\d{0,18})")


class Unsatisfiable(Exception):
    """The range asked for starts at or past the end of the body (416)."""


def requested_range(header: str | None, length: int) -> tuple[int, int] | None:
    """The inclusive `(first, last)` byte of `length` that `header` asks for, or None for the
    whole body; raises `Unsatisfiable` for a range that holds none of it."""
    if not header:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # "bytes=-500": the last 500 bytes
        suffix = int(last)
        if suffix == 0 or length == 0:
            raise Unsatisfiable
        return max(0, length - suffix), length - 1
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= length:
        raise Unsatisfiable
    end = min(int(last), length - 1) if last else length - 1
    return start, end
