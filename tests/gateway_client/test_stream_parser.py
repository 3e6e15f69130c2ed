"""EventStreamParser's fast paths give exactly the events of its general path, for any chunk.

The fast paths are a msgspec Struct for the common chunk shape and, once one such chunk has been
read, a template of its bytes around the text. The general path is orjson and `parse_chunk`. The
chunks drawn here are mostly near the common shape, since that is where the paths could part:
every field in and out of the types the Struct allows, keys in any order (and repeated, by raw
spellings that close a string and open a key), several encoders' spellings, ints past 64 bits,
bad UTF-8, lone surrogates, and, for the template, any bytes at all where the text goes. Each
stream is read whole, one byte at a time, and split at every point.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_client.events import Event, Meta, TextDelta
from gateway_client.stream_parser import EventStreamParser


class GeneralPath(EventStreamParser):
    """The parser with its fast paths off: every chunk goes through orjson and `parse_chunk`."""

    def _common(self, data: bytes, events: list[Event]) -> bool:
        return False


def read(parser: EventStreamParser, body: bytes, cuts: list[int]) -> tuple[Any, ...]:
    events: list[Event] = []
    start = 0
    for cut in [*cuts, len(body)]:
        events += parser.feed(body[start:cut])
        start = cut
    events += parser.close()
    return events, parser.done, parser.failed


def assert_same_at_every_split(body: bytes, extra_cuts: list[int]) -> None:
    expected = read(GeneralPath(), body, [])
    assert read(EventStreamParser(), body, []) == expected
    assert read(EventStreamParser(), body, list(range(1, len(body)))) == expected
    assert read(EventStreamParser(), body, sorted({min(c, len(body)) for c in extra_cuts})) == (
        expected
    )
    for cut in range(len(body) + 1):
        assert read(EventStreamParser(), body, [cut]) == expected, f"split at {cut}"


# Values -------------------------------------------------------------------------------------

# Placeholders, replaced in the encoded bytes by raw spellings no encoder writes (`RAW_TEXT`
# inside a string, `RAW_NUMBER` for a number).
TEXT_MARK = "\ue000"
NUMBER_MARK = 987654321
RAW_TEXT = [
    b"\xff",
    b"\xed\xa0\x80",  # a surrogate, UTF-8 encoded
    b"\xc0\xaf",  # overlong
    b"\\ud800",
    b"\\udc00",
    b"\\ud83d\\ude42",
    b"\\u0000",
    b"\\/",
    b"\x01",
    b'\\"',
    b'","content":"x',
    b'","reasoning":"y',
]
RAW_NUMBER = [
    b"1e400",
    b"-0",
    b"0.0",
    b"0e0",
    b"1E2",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"1" + b"0" * 400,
    b"01",
    b"NaN",
]

texts = st.one_of(
    st.sampled_from(["", " ", "a", "tok é", '"', "\\", "\n", "\u2028", "🙂", "\x00", TEXT_MARK]),
    st.sampled_from(["m", "gen-1", "stop", "assistant", "chat.completion.chunk"]),  # also elsewhere
    st.text(max_size=6),
)
ints = st.one_of(
    st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, NUMBER_MARK]),
    st.integers(),
)
scalars = st.one_of(st.none(), st.booleans(), ints, st.floats(allow_nan=False), texts)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=5,
)
maybe_text = st.one_of(texts, texts, st.none(), values)

DELTA_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "role": st.one_of(st.just("assistant"), st.none(), values),
    "content": st.one_of(
        maybe_text, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}))
    ),
    "reasoning": maybe_text,
    "reasoning_content": maybe_text,
    "refusal": st.one_of(st.none(), texts),
    "tool_calls": st.one_of(
        st.none(), st.just([{"index": 0, "function": {"name": "f", "arguments": "{}"}}])
    ),
    "channel": st.one_of(st.none(), texts, ints),
    "token_id": st.one_of(st.none(), ints, texts),
    "index": ints,
    "reasoning_details": st.just([{"type": "reasoning.text", "text": "r"}]),
    "unknown": values,
}
CHOICE_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "index": st.one_of(st.just(0), st.just(0), ints, st.just(0.0), st.just(False)),
    "finish_reason": st.one_of(st.none(), st.sampled_from(["stop", "length", ""]), values),
    "logprobs": st.one_of(st.none(), values),
    "native_finish_reason": st.one_of(st.none(), texts, ints),
    "text": texts,
    "unknown": values,
}
CHUNK_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": st.one_of(st.sampled_from(["gen-1", "gen-2", ""]), st.none(), values),
    "object": st.one_of(st.just("chat.completion.chunk"), values),
    "created": st.one_of(ints, st.floats(allow_nan=False), st.none()),
    "model": st.one_of(st.sampled_from(["m", "n"]), st.none(), values),
    "system_fingerprint": st.one_of(st.none(), texts),
    "provider": st.one_of(st.none(), texts),
    "service_tier": st.one_of(st.none(), texts, ints),
    "obfuscation": st.one_of(st.none(), texts, ints),
    "usage": st.one_of(st.none(), st.just({"prompt_tokens": 1, "cost": 0.5}), values),
    "error": st.one_of(st.none(), st.just({"message": "boom", "code": 500}), texts),
    "type": st.sampled_from(["image_generation.partial", "other"]),
    "unknown": values,
}


@st.composite
def some_of(
    draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]], always: dict[str, Any]
) -> dict[str, Any]:
    """Some of `fields` (those in `always` most of the time), in any order."""
    names = [name for name in always if draw(st.integers(0, 9)) > 0]
    names += draw(st.lists(st.sampled_from(sorted(fields)), max_size=3))
    result: dict[str, Any] = {}
    for name in draw(st.permutations(names)):
        result[name] = draw(always[name]) if name in always else draw(fields[name])
    return result


@st.composite
def deltas(draw: st.DrawFn) -> Any:
    text_field = draw(st.sampled_from(["content", "reasoning", "reasoning_content"]))
    return draw(st.one_of(some_of(DELTA_FIELDS, {text_field: texts}), values))


@st.composite
def choices(draw: st.DrawFn) -> Any:
    always = {"index": st.just(0), "delta": deltas(), "finish_reason": st.none()}
    return draw(st.one_of(some_of(CHOICE_FIELDS, always), values))


def chunks() -> st.SearchStrategy[dict[str, Any]]:
    always = {
        "id": st.just("gen-1"),
        "object": st.just("chat.completion.chunk"),
        "created": st.just(1),
        "model": st.just("m"),
        "choices": st.one_of(st.lists(choices(), min_size=1, max_size=2), st.just([]), values),
    }
    return some_of(CHUNK_FIELDS, always)


@st.composite
def encoded(draw: st.DrawFn, value: Any) -> bytes:
    """`value` as one of several encoders would write it, with placeholders made raw."""
    style = draw(st.sampled_from(["json", "json-compact", "json-unicode", "orjson", "indent"]))
    if style == "orjson":
        try:
            data = orjson.dumps(value)
        except TypeError:  # an int past 64 bits
            data = json.dumps(value).encode()
    elif style == "json-compact":
        data = json.dumps(value, separators=(",", ":")).encode()
    elif style == "json-unicode":
        data = json.dumps(value, ensure_ascii=False).encode()
    elif style == "indent":
        data = json.dumps(value, indent=1).encode()
    else:
        data = json.dumps(value).encode()
    for mark in (TEXT_MARK.encode(), json.dumps(TEXT_MARK).strip('"').encode()):
        while mark in data:
            data = data.replace(mark, draw(st.sampled_from(RAW_TEXT)), 1)
    while str(NUMBER_MARK).encode() in data:
        data = data.replace(str(NUMBER_MARK).encode(), draw(st.sampled_from(RAW_NUMBER)), 1)
    return data


def frame(payload: bytes) -> bytes:
    """One event; a payload of several lines is sent as several data lines, as SSE joins them."""
    return b"".join(b"data: " + line + b"\n" for line in payload.split(b"\n")) + b"\n"


# Streams ------------------------------------------------------------------------------------

# Where a template puts the text: any JSON value, well formed or not.
MIDDLES = [
    b'""',
    b'"a"',
    b' "a" ',
    b'"a"\n',
    b"null",
    b"1",
    b'["a"]',
    b'"a","b"',
    b'"a"}',
    b'"a","content":"b"',
    b'"a","reasoning":"b"',
    b'"\\ud800"',
    b'"\xff"',
    b'"\\u00e9\\ud83d\\ude42"',
    b'"a\\"b"',
    b'"\\\\"',
    b'"a',
    b"",
]


@st.composite
def chunk_streams(draw: st.DrawFn) -> bytes:
    parts = [frame(draw(encoded(draw(chunks())))) for _ in range(draw(st.integers(1, 5)))]
    if draw(st.booleans()):
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


@st.composite
def template_streams(draw: st.DrawFn) -> bytes:
    """Chunks that differ in their text alone, as a template expects, then in anything at all."""
    field = draw(st.sampled_from(["content", "reasoning", "reasoning_content"]))
    envelope = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {field: "\ue001"}, "finish_reason": None}],
    }
    envelope.update(draw(some_of(CHUNK_FIELDS, {})))
    head, _, tail = draw(encoded(envelope)).partition(json.dumps("\ue001").encode())
    if not tail:
        head, _, tail = head.partition("\ue001".encode())
        head, tail = head[:-1], tail[1:]
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["text", "text", "raw", "other"]))
        if kind == "text":
            middle = json.dumps(draw(texts), ensure_ascii=draw(st.booleans())).encode()
        elif kind == "raw":
            middle = draw(st.sampled_from(MIDDLES))
        else:
            parts.append(frame(draw(encoded(draw(chunks())))))
            continue
        parts.append(frame(head + middle + tail))
    return b"".join(parts)


cut_lists = st.lists(st.integers(min_value=0, max_value=2000), max_size=6)


@settings(max_examples=150, deadline=None)
@given(chunk_streams(), cut_lists)
def test_any_chunk_reads_as_the_general_path_reads_it(body: bytes, cuts: list[int]) -> None:
    assert_same_at_every_split(body, cuts)


@settings(max_examples=150, deadline=None)
@given(template_streams(), cut_lists)
def test_a_template_reads_any_bytes_as_the_general_path(body: bytes, cuts: list[int]) -> None:
    assert_same_at_every_split(body, cuts)


def test_the_common_shape_takes_the_fast_paths() -> None:
    """A guard for the properties above: they would pass, vacuously, if no chunk were fast."""
    head = b'data: {"id":"g","model":"m","choices":[{"index":0,"delta":{"content":'
    body = b"".join(head + json.dumps(f"t{i}").encode() + b"}}]}\n\n" for i in range(3))
    parser = EventStreamParser()
    assert parser.feed(body) == [Meta("g", "m"), TextDelta("t0"), TextDelta("t1"), TextDelta("t2")]
    assert parser._template is not None
    assert parser._template.head == head[6:]
