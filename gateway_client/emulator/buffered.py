"""`stream: false`: the same scripted generation, answered as one JSON document.

Generation still takes real time (time to first token plus one interval per token) so clients
see realistic latency and a disconnect mid-generation is recorded as `cancelled`. Failures map
to what a non-streaming request gets: an HTTP error in the dialect's envelope, or for `drop`
a response that breaks off mid-body.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from .generation import Generation

__all__ = ["completion_body", "run_buffered"]


def completion_body(gen: Generation) -> dict[str, Any]:
    """The `chat.completion` or `text_completion` object for what `gen` delivered."""
    dialect, script, record = gen.dialect, gen.script, gen.record
    pieces = script.pieces[: gen.delivered]
    content = "".join(p.text for p in pieces if p.kind == "content")
    reasoning = "".join(p.text for p in pieces if p.kind == "reasoning")
    usage = dialect.usage(
        record.tokens_prompt,
        record.tokens_completion,
        record.native_tokens_reasoning,
        estimated=script.usage_estimated,
    )
    obj = "text_completion" if gen.request.text_completion else "chat.completion"
    body = dialect.envelope(gen.ids, gen.model, gen.created, first=True, obj=obj)
    body.setdefault("created", gen.created)
    if gen.request.text_completion:
        choice: dict[str, Any] = {
            "index": 0,
            "text": content,
            "logprobs": None,
            "finish_reason": script.finish_reason,
        }
        return {**body, "choices": [choice], "usage": usage}

    message: dict[str, Any] = {"role": "assistant", "content": content}
    message.update(dialect.message_reasoning(reasoning, gen.seed))
    calls: dict[int, dict[str, Any]] = {}
    for piece in pieces:
        if piece.kind == "tool_open":
            calls[piece.index] = {
                "id": piece.data["id"],
                "type": "function",
                "function": {"name": piece.data["name"], "arguments": ""},
            }
        elif piece.kind == "tool_args" and piece.index in calls:
            calls[piece.index]["function"]["arguments"] += piece.text
        elif piece.kind == "annotations" and dialect.hosted_tools:
            message.setdefault("annotations", []).extend(piece.data)
        elif piece.kind == "images" and dialect.hosted_tools:
            message.setdefault("images", []).extend(
                {"type": "image_url", "image_url": {"url": image["url"]}} for image in piece.data
            )
        elif piece.kind == "artifacts" and dialect.media_output:
            message.setdefault("artifacts", []).extend(piece.data)
    audio = [p for p in pieces if p.kind == "audio"]
    if audio and dialect.media_output:
        message["audio"] = {
            "data": base64.b64encode(b"".join(p.data for p in audio)).decode("ascii"),
            "transcript": "".join(p.text for p in audio),
            "format": "wav",
        }
        message["content"] = content or None
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
        message["content"] = content or None
    choice = {"index": 0, "message": message, "finish_reason": script.finish_reason}
    return {**body, "choices": [choice], "usage": usage}


async def run_buffered(gen: Generation) -> None:
    """Generate in real time, then answer with a JSON body (or the dialect's error)."""
    channel, dialect, script, options = gen.channel, gen.dialect, gen.script, gen.options

    async def fail(kind: str) -> None:
        reply = dialect.error_reply(kind, gen.ids)
        await channel.json(reply.status, reply.body, reply.headers)
        gen.failed(kind)

    if script.failure == "error-before":
        if await channel.pause(script.ttft_s):
            return gen.cancelled()
        return await fail("before")
    if dialect.silence_ends_stream and script.ttft_s > options.tiny_stall_s:
        if await channel.pause(2 * options.tiny_stall_s):
            return gen.cancelled()
        return await fail("stall")
    if await channel.pause(script.ttft_s):
        return gen.cancelled()

    async for piece in channel.paced(script.delivered, options.token_interval_s):
        gen.deliver(piece)
    if channel.gone:
        return gen.cancelled()

    match script.failure:
        case "error-midstream":
            return await fail("midstream")
        case "stall":
            if await channel.pause(gen.stall_limit_s):
                return gen.cancelled()
            return await fail("stall")
        case "drop":
            partial = orjson.dumps(completion_body(gen))
            await channel.start(
                200, dialect.json_headers(gen.ids, gen.model, gen.record.total_cost)
            )
            await channel.write(partial[: len(partial) // 2])
            channel.abort()
            return gen.dropped()

    body = completion_body(gen)
    headers = dialect.json_headers(gen.ids, gen.model, gen.record.total_cost)
    await channel.json(200, body, headers)
    gen.settle("completed", script.finish_reason)
