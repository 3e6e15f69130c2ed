"""LOG_FORMAT=json: one JSON object per line, the same keys on every line."""

from __future__ import annotations

import logging
import sys

import orjson

from chatapp.log_format import JsonFormatter
from chatapp.streaming.log_context import ContextFilter, bind_generation

KEYS = ["time", "level", "logger", "message", "generation", "conversation", "exc_info"]


def formatted(message: str, *args: object, exc_info: bool = False) -> str:
    entry = logging.LogRecord(
        "chatapp.streaming.worker", logging.ERROR, __file__, 1, message, args,
        sys.exc_info() if exc_info else None,
    )  # fmt: skip
    ContextFilter().filter(entry)
    return JsonFormatter().format(entry)


def test_a_line_has_every_key_and_none_of_a_generation_outside_one() -> None:
    line = orjson.loads(formatted("Listening on %s", "127.0.0.1:8001"))
    assert list(line) == KEYS
    assert line["level"] == "ERROR"
    assert line["logger"] == "chatapp.streaming.worker"
    assert line["message"] == "Listening on 127.0.0.1:8001"
    assert (line["generation"], line["conversation"], line["exc_info"]) == (None, None, None)
    assert line["time"].endswith("+00:00")


async def test_a_traceback_stays_on_its_line_as_text() -> None:
    bind_generation(12, 3)
    try:
        raise ValueError("bad chunk\nsecond line")
    except ValueError:
        text = formatted("Generation %s crashed", 12, exc_info=True)
    assert "\n" not in text
    line = orjson.loads(text)
    assert (line["generation"], line["conversation"]) == (12, 3)
    assert line["exc_info"].startswith("Traceback (most recent call last):")
    assert line["exc_info"].endswith("ValueError: bad chunk\nsecond line")
