"""Every captured stream in tests/fixtures/streams replays to its expected fields, whole and in
7-byte and 1-byte pieces, through the same `replay` command users run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway_client.capture import parse_capture, replay

STREAMS = Path(__file__).parent.parent / "fixtures" / "streams"
CASES = sorted(path.stem for path in STREAMS.glob("*.http"))


def mismatches(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Expected dicts must be contained in actual ones (other keys may be present); anything else
    must be equal, with the same JSON type (an int code is not a string code)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        problems = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{path}.{key}: missing")
            else:
                problems += mismatches(value, actual[key], f"{path}.{key}")
        return problems
    same_type = type(expected) is type(actual) or (
        isinstance(expected, int | float)
        and isinstance(actual, int | float)
        and not isinstance(expected, bool)
        and not isinstance(actual, bool)
    )
    if expected != actual or not same_type:
        return [f"{path}: expected {expected!r}, got {actual!r}"]
    return []


def test_there_are_cases() -> None:
    assert len(CASES) >= 19


@pytest.mark.parametrize("chunk_size", [None, 7, 1])
@pytest.mark.parametrize("name", CASES)
def test_replay_matches_expectation(name: str, chunk_size: int | None) -> None:
    capture = parse_capture((STREAMS / f"{name}.http").read_bytes())
    expected = json.loads((STREAMS / f"{name}.expect.json").read_text())
    actual = json.loads(json.dumps(replay(capture, chunk_size=chunk_size).to_dict()))
    assert mismatches(expected, actual) == []


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
