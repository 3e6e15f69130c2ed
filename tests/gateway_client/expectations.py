"""The subset rule replayed streams are checked by, shared by the fixture and real-stream tests."""

from __future__ import annotations

import json
from typing import Any

from gateway_client.capture import parse_capture, replay


def replayed(raw: bytes, chunk_size: int | None) -> dict[str, Any]:
    """What `python -m gateway_client replay` prints for `raw`, as parsed JSON."""
    completion = replay(parse_capture(raw), chunk_size=chunk_size)
    result: dict[str, Any] = json.loads(json.dumps(completion.to_dict()))
    return result


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
