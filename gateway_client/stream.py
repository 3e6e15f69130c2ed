"""`EventStream`: one streamed response, read with deadlines, folded as it goes.

Deadlines are enforced per read, not by httpx's read timeout, because what matters is progress
of the answer: keep-alive comments and a byte-a-second drip keep a socket busy without producing
an event. Before the first event the first-token deadline applies, then the idle deadline,
always bounded by the total one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self

import httpx

from .accumulator import Accumulator, Completion
from .dialects import default_timeouts, detect_dialect, header_request_id, header_served_model
from .errors import (
    ErrorInfo,
    GatewayTimeout,
    InBandError,
    IncompleteStream,
    LimitExceeded,
    Phase,
    ProtocolError,
    StreamFailed,
)
from .events import (
    AudioOutput,
    Event,
    ImageOutput,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from .harmony_tags import HarmonyTags
from .retries import RetryBudget
from .stream_client import StreamClient
from .stream_parser import EventStreamParser, is_event_stream
from .think_tags import ThinkTags

__all__ = ["EventStream"]

_OUTPUT = (TextDelta, ReasoningDelta, ToolCallDelta, ImageOutput, AudioOutput)


def _earliest(*deadlines: float | None) -> float | None:
    present = [d for d in deadlines if d is not None]
    return min(present) if present else None


class EventStream:
    """Use as `async with client.stream_chat(...) as stream: async for event in stream: ...`."""

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
        self.dialect = client.dialect
        self.timeouts = client.timeouts
        self.response: httpx.Response | None = None
        self._accumulator = Accumulator(status=None)
        limits = client.limits
        self._parser = EventStreamParser(
            max_line_bytes=limits.max_line_bytes, max_event_bytes=limits.max_event_bytes
        )
        self._started_at = 0.0
        self._first_event_at: float | None = None
        self._first_output_at: float | None = None
        self._last_event_at = 0.0
        self._total_deadline: float | None = None

    # Lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        self._started_at = loop.time()
        timeouts = self.timeouts
        if timeouts.total is not None:
            self._total_deadline = self._started_at + timeouts.total
        first = None if timeouts.first_token is None else self._started_at + timeouts.first_token
        response = await self._client.open(
            self._url,
            self._body,
            accept="text/event-stream",
            deadline=_earliest(first, self._total_deadline),
            retries=self._retries,
        )
        if not is_event_stream(response.headers.get("content-type")):
            raise await self._client.read_status_error(response)
        self.response = response
        headers = response.headers
        if not self._client.dialect_is_explicit:
            self.dialect = detect_dialect(headers, self.dialect)
            if not self._client.timeouts_are_explicit:
                self.timeouts = default_timeouts(self.dialect)
        self._accumulator = Accumulator(
            status=response.status_code,
            generation_id=headers.get("x-generation-id") or None,
            request_id=header_request_id(headers, self.dialect),
            served_model=header_served_model(headers, self.dialect),
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection: before `[DONE]`, this cancels the generation upstream."""
        if self.response is not None:
            await self.response.aclose()

    # Results --------------------------------------------------------------------------------

    @property
    def completion(self) -> Completion:
        return self._accumulator.completion

    @property
    def content(self) -> str:
        return self._accumulator.content

    @property
    def generation_id(self) -> str | None:
        return self._accumulator.generation_id

    @property
    def request_id(self) -> str | None:
        return self._accumulator.request_id

    @property
    def time_to_first_token(self) -> float | None:
        """Seconds from sending the request to the first output (answer, reasoning, tool call)."""
        if self._first_output_at is None:
            return None
        return self._first_output_at - self._started_at

    # Reading --------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        response = self.response
        if response is None:
            raise RuntimeError("enter the stream with `async with` before iterating it")
        loop = asyncio.get_running_loop()
        parser = self._parser
        accumulator = self._accumulator
        think = ThinkTags()  # `<think>` at the start of content: reasoning, not the answer
        harmony = HarmonyTags()  # gpt-oss's `<|channel|>analysis<|message|>…` there: likewise
        pieces = response.aiter_bytes()
        received = 0
        max_body = self._client.limits.max_body_bytes
        dropped: str | None = None
        while True:
            deadline, phase = self._deadline()
            ended = False
            try:
                async with asyncio.timeout_at(deadline):
                    piece = await anext(pieces)
            except StopAsyncIteration:
                ended = True
                events = parser.close()
            except TimeoutError:
                raise self._timeout(phase) from None
            except httpx.HTTPError as exc:
                ended = True
                dropped = str(exc) or type(exc).__name__
                events = parser.close()
            else:
                received += len(piece)
                if received > max_body:
                    raise self._fail(
                        LimitExceeded,
                        ErrorInfo(
                            None,
                            "limit_exceeded",
                            "limit_exceeded",
                            f"the response grew past {max_body} bytes",
                        ),
                    )
                events = parser.feed(piece)
            if parser.failed:  # an error's text may quote the request, key and all
                events = self._client.redactor.events(events)
            events = think.feed(harmony.feed(events))
            if ended or parser.finished:
                events += think.feed(harmony.close()) + think.close()
            if events:
                now = loop.time()
                self._last_event_at = now
                if self._first_event_at is None:
                    self._first_event_at = now
                for event in events:
                    if self._first_output_at is None and isinstance(event, _OUTPUT):
                        self._first_output_at = now
                    accumulator.add(event)
                    yield event
            if ended or parser.finished:
                break
        if parser.done and accumulator.error is None:
            return
        raise self._failure(dropped)

    def _deadline(self) -> tuple[float | None, Phase]:
        timeouts = self.timeouts
        phase: Phase
        if self._first_event_at is None:
            limit, start, phase = timeouts.first_token, self._started_at, "first_token"
        else:
            limit, start, phase = timeouts.idle, self._last_event_at, "idle"
        own = None if limit is None else start + limit
        if self._total_deadline is not None and (own is None or self._total_deadline <= own):
            return self._total_deadline, "total"
        return own, phase

    def _timeout(self, phase: Phase) -> GatewayTimeout:
        timeouts = self.timeouts
        seconds = {"first_token": timeouts.first_token, "idle": timeouts.idle}.get(
            phase, timeouts.total
        )
        what = {
            "first_token": "no output",
            "idle": "no new event",
            "total": "the stream did not finish",
        }[phase]
        message = f"{what} within {seconds:g} s ({phase.replace('_', ' ')} deadline)"
        self._accumulator.fail(ErrorInfo(None, f"{phase}_timeout", "timeout", message))
        return GatewayTimeout(
            message,
            phase=phase,
            request_id=self._accumulator.request_id,
            completion=self._accumulator.completion,
        )

    def _failure(self, dropped: str | None) -> StreamFailed:
        info = self._accumulator.error
        if info is None:
            reason = f"the connection closed ({dropped})" if dropped else "the stream ended"
            return IncompleteStream(
                f"{reason} before [DONE]: the answer is incomplete",
                request_id=self._accumulator.request_id,
                completion=self._accumulator.completion,
            )
        if info.type == "limit_exceeded":
            return self._fail(LimitExceeded, info)
        if info.type == "protocol_error":
            return self._fail(ProtocolError, info)
        return InBandError(info, completion=self._accumulator.completion)

    def _fail(self, kind: type[ProtocolError], info: ErrorInfo) -> ProtocolError:
        self._accumulator.fail(info)
        return kind(
            info.message,
            request_id=self._accumulator.request_id,
            completion=self._accumulator.completion,
        )
