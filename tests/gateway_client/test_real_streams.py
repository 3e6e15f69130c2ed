"""Streams recorded from real providers replay to the fields in their expected.json, whole and in
7-byte and 1-byte pieces, and none of them warns.

The recordings are not in the repository: they are read from `shared/real-streams` beside the
checkout (`../shared/real-streams` from its root; its SOURCES.md names where each one was
recorded), and without them this module is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .expectations import mismatches, replayed

STREAMS = Path(__file__).resolve().parents[3] / "shared" / "real-streams"

if not (STREAMS / "expected.json").is_file():
    pytest.skip(
        f"the recordings of real providers' streams are missing: {STREAMS}/expected.json and its "
        "*.sse files, kept outside the repository in shared/real-streams beside the checkout "
        "(../shared/real-streams). They check that streams as real gateways sent them parse to "
        "the fields expected, whole and in 7- and 1-byte pieces, no warning, nothing unread",
        allow_module_level=True,
    )

EXPECTED = json.loads((STREAMS / "expected.json").read_text())
FILES = sorted(path.name for path in STREAMS.glob("*.sse"))


def test_every_recording_has_an_expectation() -> None:
    assert FILES
    assert sorted(EXPECTED) == FILES


@pytest.mark.parametrize("chunk_size", [None, 7, 1])
@pytest.mark.parametrize("name", FILES)
def test_replay_matches_expectation(name: str, chunk_size: int | None) -> None:
    actual = replayed((STREAMS / name).read_bytes(), chunk_size)
    assert mismatches(EXPECTED[name], actual) == []


@pytest.mark.parametrize("name", FILES)
def test_nothing_is_left_unread(name: str) -> None:
    actual = replayed((STREAMS / name).read_bytes(), None)
    assert (actual["warnings"], actual["unread"]) == (EXPECTED[name].get("warnings", []), [])
