"""`SpeechStream`: raw audio bytes from `/audio/speech`, no SSE.

After audio starts the gateway has no in-band error: a failure just ends the body early. So the
byte count alone never proves a whole result; `confirm()` asks the generation record, and only an
outcome of `completed` sets `completed`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from .errors import GatewayTimeout, IncompleteStream, StatusError
from .generation_record import GenerationRecord
from .retries import RetryBudget
from .stream_client import StreamClient

__all__ = ["SpeechStream"]


class SpeechStream:
    def __init__(
        self,
        client: StreamClient,
        url: str,
        body: dict[str, Any],
        retries: RetryBudget | None = None,
    ) -> None:
        self._client = client
        self._url = url
        self._body = body
        self._retries = RetryBudget() if retries is None else retries
        self.response: httpx.Response | None = None
        self.generation_id: str | None = None
        self.media_type: str | None = None
        self.bytes_received = 0
        self.completed = False
        self.record: GenerationRecord | None = None

    async def __aenter__(self) -> Self:
        timeouts = self._client.timeouts
        loop = asyncio.get_running_loop()
        deadline = None if timeouts.first_token is None else loop.time() + timeouts.first_token
        response = await self._client.open(
            self._url, self._body, accept="audio/*", deadline=deadline, retries=self._retries
        )
        media_type = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if media_type in ("application/json", "text/event-stream", "text/html"):
            raise await self._client.read_status_error(response)
        self.response = response
        self.media_type = media_type or "application/octet-stream"
        self.generation_id = response.headers.get("x-generation-id")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.response is not None:
            await self.response.aclose()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        if self.response is None:
            raise RuntimeError("enter the stream with `async with` before iterating it")
        idle = self._client.timeouts.idle
        pieces = self.response.aiter_bytes()
        while True:
            try:
                async with asyncio.timeout(idle):
                    piece = await anext(pieces)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise GatewayTimeout(f"no audio within {idle:g} s", phase="idle") from None
            except httpx.HTTPError as exc:
                raise IncompleteStream(f"the audio stream broke off: {exc}") from exc
            self.bytes_received += len(piece)
            if self.bytes_received > self._client.limits.max_body_bytes:
                raise IncompleteStream("the audio grew past the response size limit")
            yield piece

    async def save(self, path: str | Path) -> int:
        """Write the audio to `path` as it arrives; returns the bytes written."""
        file = await asyncio.to_thread(Path(path).open, "wb")
        try:
            async for piece in self:
                await asyncio.to_thread(file.write, piece)
        finally:
            await asyncio.to_thread(file.close)
        return self.bytes_received

    async def confirm(self) -> GenerationRecord:
        """Ask the generation record whether the audio is whole; sets `completed`."""
        if not self.generation_id:
            raise StatusError("the gateway sent no generation ID to confirm", status=200)
        self.record = await self._client.get_generation(self.generation_id)
        self.completed = self.record.outcome == "completed"
        return self.record
