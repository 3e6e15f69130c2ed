"""Reading a gateway's generation record: its outcome is one of the words the emulator writes."""

from __future__ import annotations

from typing import Any

import pytest

from gateway_client.generation_record import parse_generation_record


@pytest.mark.parametrize(
    ("data", "outcome"),
    [
        ({"outcome": "in_progress"}, "in_progress"),
        ({"outcome": "completed"}, "completed"),
        ({"outcome": "cancelled"}, "cancelled"),
        ({"outcome": "error"}, "error"),
        ({}, "completed"),
        ({"cancelled": True}, "cancelled"),
        # Settled, and not a completion: read as an error, the word kept in `raw`.
        ({"outcome": "exploded"}, "error"),
        ({"outcome": 3}, "error"),
    ],
)
def test_the_outcome_is_a_word_the_record_type_names(data: dict[str, Any], outcome: str) -> None:
    record = parse_generation_record("gen-1", {"data": data})
    assert (record.id, record.outcome, record.raw) == ("gen-1", outcome, data)
