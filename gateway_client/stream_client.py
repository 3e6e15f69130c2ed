"""`StreamClient`: what an `EventStream` or a `SpeechStream` asks of the client that opened it.

`GatewayClient` is one (structurally); the streams name this protocol instead of the client, so
that the client can import them without their importing it back.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from .dialects import Limits, Timeouts
from .errors import StatusError
from .generation_record import GenerationRecord
from .redaction import Redactor
from .retries import RetryBudget

__all__ = ["StreamClient"]


class StreamClient(Protocol):
    dialect: str | None
    dialect_is_explicit: bool
    timeouts: Timeouts
    timeouts_are_explicit: bool
    limits: Limits
    redactor: Redactor

    async def open(
        self,
        url: str,
        body: dict[str, Any],
        *,
        accept: str,
        deadline: float | None,
        retries: RetryBudget,
    ) -> httpx.Response:
        """POST `body` and return the 2xx streaming response; `StatusError` for any other. Any
        resend, at any layer, is drawn from `retries`, the answer's budget."""
        ...

    async def read_status_error(self, response: httpx.Response) -> StatusError:
        """The error an unusable response describes (its body read up to a cap, then closed)."""
        ...

    async def get_generation(self, generation_id: str) -> GenerationRecord:
        """The gateway's record of the generation `generation_id`."""
        ...
