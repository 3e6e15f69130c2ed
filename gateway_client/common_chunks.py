"""The fast path for the chunk shape nearly every token arrives in: exactly the events the general
path (orjson, then `chunks.parse_chunk`) would give, for less.

The common shape (one choice's text, role or finish reason, nothing else) is decoded straight
from bytes into msgspec Structs that admit nothing else; once one such chunk has been read, the
bytes around its text become a `Template`, and a chunk with the same bytes around its text needs
only that string decoded. `stream_parser.EventStreamParser` uses both and falls back to the general
path for anything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

import msgspec
import orjson

from .events import ReasoningDelta, TextDelta

__all__ = ["CommonRead", "Template", "decode_common", "decode_str", "learn_template", "read_common"]

# The chunk shape nearly every token arrives in, decoded straight from bytes by msgspec. Every
# field is declared with the only types it may take (unknown keys and other types fail the decode
# and the chunk goes through `parse_chunk`), so a chunk read here means exactly what it would mean
# there: orjson would accept the same bytes (ints within 64 bits, valid UTF-8, nothing skipped
# unread) and `parse_chunk` would give the same events. `None`-typed fields must be null and
# `_Empty` ones empty, as anything else is read there.
_Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_Empty = Annotated[str, msgspec.Meta(max_length=0)]


class _Delta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    refusal: _Empty | None = None
    tool_calls: None = None
    channel: str | None = None
    token_id: _Int | None = None


class _Choice(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    delta: _Delta
    index: _Int = 0
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    logprobs: None = None


class _Chunk(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    choices: list[_Choice]
    id: str | None = None
    object: str | None = None
    created: _Int | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    provider: str | None = None
    service_tier: str | None = None
    obfuscation: str | None = None
    usage: None = None


decode_common = msgspec.json.Decoder(_Chunk).decode
decode_str = msgspec.json.Decoder(str).decode

# (id, model, event type, text, finish reason) of a common chunk.
type CommonRead = tuple[
    str | None, str | None, type[TextDelta | ReasoningDelta], str | None, str | None
]


def read_common(chunk: _Chunk) -> CommonRead | None:
    """What `parse_chunk` would read from the chunk, or None if the order of the delta's keys
    (which a Struct does not keep) could matter: at most one of its text fields may be set."""
    if not chunk.choices:
        return chunk.id, chunk.model, TextDelta, None, None
    choice = chunk.choices[0]
    if choice.index:
        return None  # `parse_chunk` looks for the choice with index 0
    delta = choice.delta
    text, reasoning, other = delta.content, delta.reasoning, delta.reasoning_content
    if (text and (reasoning or other)) or (reasoning and other):
        return None
    if text:
        return chunk.id, chunk.model, TextDelta, text, choice.finish_reason
    return chunk.id, chunk.model, ReasoningDelta, reasoning or other, choice.finish_reason


@dataclass(frozen=True, slots=True)
class Template:
    """A common chunk's bytes around its one text value: in a stream, consecutive chunks usually
    differ in that value alone, so a chunk that starts with `head` and ends with `tail` needs only
    the string between them decoded."""

    head: bytes
    tail: bytes
    start: int  # len(head), len(tail) and their sum, kept as they are read per chunk
    end: int
    size: int
    kind: type[TextDelta | ReasoningDelta]
    id: str | None
    model: str | None
    reason: str | None


_MARKS = {b'"\\u0000mark one"': "\x00mark one", b'"\\u0000mark two"': "\x00mark two"}


def learn_template(data: bytes, text: str) -> Template | None:
    """The template of a common chunk whose text is `text`, if its bytes can be cut around it.

    The cut is found by looking for the text as the usual encoders write it, and proved by
    decoding the chunk with two other strings in its place: each must come out as the text and
    all else the same. Then any JSON string there is read as that chunk's text, with the rest
    unchanged, by JSON's grammar.
    """
    for token in (orjson.dumps(text), json.dumps(text).encode()):
        at = data.rfind(token)
        if at >= 0:
            break
    else:
        return None
    head, tail = data[:at], data[at + len(token) :]
    reads = []
    for mark, marked in _MARKS.items():
        try:
            read = read_common(decode_common(head + mark + tail))
        except msgspec.DecodeError:
            return None
        if read is None or read[3] != marked:
            return None
        reads.append(read[:3] + read[4:])
    if reads[0] != reads[1]:
        return None
    chunk_id, model, kind, reason = reads[0]
    size = len(head) + len(tail)
    return Template(head, tail, len(head), len(tail), size, kind, chunk_id, model, reason)
