"""The SSE engine: play a `Script` to the client as one gateway's event stream, in real time.

Order of events, per the gateways' documents: (pre-stream error, as a JSON response) | headers
(at once, or with the first chunk for Numes) -> keep-alive comments while waiting for the first
token (Osmexo `: ping`, Nodul `: keepalive`) -> role chunk (Osmexo, tiny) -> one chunk per piece,
paced at `tokens_per_second` -> finish chunk with an empty delta -> usage chunk (`choices: []`,
not on tiny-3b) -> `data: [DONE]`; or, instead of the ending, a failure: in-band error (with or
without `[DONE]`), a stall, or a dropped connection. Every frame is its own `send`, so it is
flushed at once; a client disconnect stops the loop and settles the record as `cancelled`.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from .generation import Generation
from .scenarios import Piece

__all__ = ["frame", "run_stream"]

DONE = b"data: [DONE]\n\n"


def frame(payload: dict[str, Any]) -> bytes:
    """One SSE event: `data: <json>` and a blank line."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


class _Stream:
    """Per-request sending state."""

    def __init__(self, gen: Generation) -> None:
        self.gen = gen
        self.channel = gen.channel
        self.dialect = gen.dialect
        self.text_completion = gen.request.text_completion
        self.obj = "text_completion" if self.text_completion else "chat.completion.chunk"
        self.first_chunk = True
        self.role_sent = False

    async def open(self) -> None:
        gen = self.gen
        if not self.channel.started:
            headers = self.dialect.stream_headers(gen.ids, gen.model, gen.cost_estimate)
            await self.channel.start(200, headers)

    async def send(self, payload: dict[str, Any] | bytes) -> None:
        await self.open()
        await self.channel.write(payload if isinstance(payload, bytes) else frame(payload))

    def chunk(
        self, delta: dict[str, Any] | None, finish: str | None, text: str = ""
    ) -> dict[str, Any]:
        gen = self.gen
        body = self.dialect.envelope(
            gen.ids, gen.model, gen.created, first=self.first_chunk, obj=self.obj
        )
        self.first_chunk = False
        if self.text_completion:
            body["choices"] = [self.dialect.text_choice(text, finish)]
        else:
            body["choices"] = [self.dialect.choice(delta or {}, finish)]
        return body

    async def role(self) -> None:
        if self.dialect.role_chunk and not self.text_completion and not self.role_sent:
            self.role_sent = True
            await self.send(self.chunk({"role": "assistant", "content": ""}, None))

    async def piece(self, piece: Piece) -> bool:
        """Send `piece`; False if this gateway has nothing to send for it."""
        if self.text_completion:
            if piece.kind != "content":
                return False
            await self.send(self.chunk(None, None, piece.text))
            return True
        delta = self.dialect.delta(piece, self.gen.seed)
        if delta is None:
            return False
        await self.role()
        if not self.role_sent:
            self.role_sent = True
            delta = {"role": "assistant", **delta}
        await self.send(self.chunk(delta, None))
        return True

    async def error(self, kind: str) -> None:
        gen = self.gen
        await self.send(self.dialect.inband_error(kind, gen.ids, gen.model, gen.created))
        if self.dialect.done_after_error:
            await self.channel.write(DONE)
        await self.channel.end()
        gen.failed(kind)

    async def wait_first_token(self, seconds: float) -> bool:
        """Silence or keep-alive comments until the first token is due; True if the client left."""
        gen = self.gen
        deadline = time.monotonic() + seconds
        keepalive = self.dialect.keepalive if self.channel.started else None
        if keepalive is None:
            return await self.channel.pause_until(deadline)
        options = gen.options
        every = (
            options.slow_start_keepalive_s
            if gen.script.slow_start
            else options.keepalive_interval_s
        )
        every = max(every, 0.05)
        while True:
            next_ping = min(deadline, time.monotonic() + every)
            if await self.channel.pause_until(next_ping):
                return True
            if next_ping >= deadline:
                return False
            await self.channel.write(keepalive)


async def run_stream(gen: Generation) -> None:
    """Play `gen.script` as an event stream; returns when the exchange is over."""
    channel, dialect, script, options = gen.channel, gen.dialect, gen.script, gen.options
    stream = _Stream(gen)

    if script.failure == "error-before":
        if await channel.pause(script.ttft_s):
            return gen.cancelled()
        reply = dialect.error_reply("before", gen.ids)
        await channel.json(reply.status, reply.body, reply.headers)
        return gen.failed("before")

    if dialect.early_commit:
        await stream.open()
        if dialect.keepalive is not None and dialect.keepalive_at_open:
            await channel.write(dialect.keepalive)
        if dialect.role_chunk_at_open:
            await stream.role()

    ttft = script.ttft_s
    if dialect.silence_ends_stream and ttft > options.tiny_stall_s:
        # tiny-3b retries a silent node once, then gives up with an empty stream.
        if await channel.pause(2 * options.tiny_stall_s):
            return gen.cancelled()
        return await stream.error("stall")
    if await stream.wait_first_token(ttft):
        return gen.cancelled()

    interval = options.token_interval_s
    async for piece in channel.paced(script.delivered, interval):
        await stream.piece(piece)
        gen.deliver(piece)
    if channel.gone:
        return gen.cancelled()

    match script.failure:
        case "error-midstream":
            if await channel.pause(interval):
                return gen.cancelled()
            return await stream.error("midstream")
        case "stall":
            if await channel.pause(gen.stall_limit_s):
                return gen.cancelled()
            return await stream.error("stall")
        case "drop":
            channel.abort()
            return gen.dropped()

    if await channel.pause(interval):
        return gen.cancelled()
    await stream.role()
    await stream.send(stream.chunk({}, script.finish_reason))
    if dialect.facts.streams_usage:
        record = gen.record
        usage = dialect.usage(
            record.tokens_prompt,
            record.tokens_completion,
            record.native_tokens_reasoning,
            estimated=script.usage_estimated,
        )
        body = dialect.envelope(gen.ids, gen.model, gen.created, first=False, obj=stream.obj)
        await stream.send({**body, "choices": [], "usage": usage})
    await channel.end(DONE)
    gen.settle("completed", script.finish_reason)
