"""The byte range a stored read aloud's request asks for (chatapp.read_aloud.byte_ranges)."""

from __future__ import annotations

import pytest

from chatapp.read_aloud.byte_ranges import Unsatisfiable, requested_range


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("", None),
        ("bytes=0-", (0, 999)),
        ("bytes=100-199", (100, 199)),
        ("bytes=900-5000", (900, 999)),
        ("bytes=-10", (990, 999)),
        ("bytes=" + "9" * 5000 + "-", None),  # no ValueError from int(): the whole body
        ("bytes=-5000", (0, 999)),
        ("bytes=5-2", None),  # not a valid range: the whole body
        ("bytes=0-1,5-6", None),  # several ranges: the whole body
        ("items=0-1", None),
        ("bytes=-", None),
    ],
)
def test_the_range_asked_for(header: str | None, expected: tuple[int, int] | None) -> None:
    assert requested_range(header, 1000) == expected


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=2000-3000", "bytes=-0"])
def test_a_range_past_the_end_is_unsatisfiable(header: str) -> None:
    with pytest.raises(Unsatisfiable):
        requested_range(header, 1000)
