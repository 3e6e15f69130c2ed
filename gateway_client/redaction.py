"""Keeping the client's API key out of every error it reports.

A gateway may quote the request it refuses, headers and all ("invalid key in: Authorization:
Bearer sk-..."), in an error response's body, an error event or a malformed event; those texts
go on to pages, databases and logs. So the client cuts its own key out where they enter: an
error response's body before it is parsed, and the errors the stream parser reports. Keys
shorter than `MIN_SECRET_CHARS` are left alone: cutting every "ab" out of an error would garble
it, and such a key guards nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .errors import ErrorInfo
from .events import ErrorEvent, Event

__all__ = ["MASK", "MIN_SECRET_CHARS", "Redactor"]

MASK = "[api key]"
MIN_SECRET_CHARS = 8


@dataclass(frozen=True, slots=True)
class Redactor:
    secret: str = field(repr=False)

    @property
    def active(self) -> bool:
        return len(self.secret) >= MIN_SECRET_CHARS

    def bytes(self, data: bytes) -> bytes:
        if not self.active:
            return data
        return data.replace(self.secret.encode(), MASK.encode())

    def text(self, text: str) -> str:
        return text.replace(self.secret, MASK) if self.active else text

    def info(self, info: ErrorInfo) -> ErrorInfo:
        code = self.text(info.code) if isinstance(info.code, str) else info.code
        return dataclasses.replace(
            info,
            code=code,
            type=None if info.type is None else self.text(info.type),
            message=self.text(info.message),
            request_id=None if info.request_id is None else self.text(info.request_id),
        )

    def events(self, events: list[Event]) -> list[Event]:
        """`events` with their errors' text redacted (the others are the model's output)."""
        return [ErrorEvent(self.info(e.info)) if isinstance(e, ErrorEvent) else e for e in events]
