"""`LOG_FORMAT=json`: one JSON object per log line, for log shippers.

Every object has the same keys: `time` (UTC, ISO 8601, milliseconds), `level`, `logger`,
`message`, `generation` and `conversation` (chatapp.streaming.log_context; null outside a
generation) and `exc_info` (the formatted traceback, or null). A message or traceback with
newlines stays on its line, escaped, so a shipper never has to guess where a record ends.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import orjson

__all__ = ["JsonFormatter"]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "generation": getattr(record, "generation", None),
            "conversation": getattr(record, "conversation", None),
            "exc_info": self.formatException(record.exc_info) if record.exc_info else None,
        }
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        # default=str: a stray non-JSON value in `extra` must not lose the line.
        return orjson.dumps(entry, default=str).decode()
