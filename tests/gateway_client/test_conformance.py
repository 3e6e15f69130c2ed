"""Every captured stream in tests/fixtures/streams replays to its expected fields, whole and in
7-byte and 1-byte pieces, through the same `replay` command users run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .expectations import mismatches, replayed

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
CASES = sorted(path.stem for path in STREAMS.glob("*.http"))


def test_there_are_cases() -> None:
    assert len(CASES) >= 23


@pytest.mark.parametrize("chunk_size", [None, 7, 1])
@pytest.mark.parametrize("name", CASES)
def test_replay_matches_expectation(name: str, chunk_size: int | None) -> None:
    expected = json.loads((STREAMS / f"{name}.expect.json").read_text())
    actual = replayed((STREAMS / f"{name}.http").read_bytes(), chunk_size)
    assert mismatches(expected, actual) == []


@pytest.mark.parametrize("name", CASES)
def test_no_fixture_warns_unless_it_expects_to(name: str) -> None:
    expected = json.loads((STREAMS / f"{name}.expect.json").read_text())
    actual = replayed((STREAMS / f"{name}.http").read_bytes(), None)
    assert actual["warnings"] == expected.get("warnings", [])


@pytest.mark.parametrize("chunk_size", ["7", "1"])
def test_replay_command_prints_the_contract(chunk_size: str) -> None:
    name = "numes-error-midstream"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway_client",
            "replay",
            str(STREAMS / f"{name}.http"),
            "--chunk-size",
            chunk_size,
        ],
        capture_output=True,
        check=True,
    )
    expected = json.loads((STREAMS / f"{name}.expect.json").read_text())
    assert mismatches(expected, json.loads(result.stdout)) == []


def test_mismatches_is_strict_about_json_types() -> None:
    assert mismatches({"code": 504}, {"code": "504"}) != []
    assert mismatches({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}) == []
    assert mismatches({"a": []}, {"a": [1]}) != []
