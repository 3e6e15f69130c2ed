"""SSEDecoder by the WHATWG event-stream rules, over every split point of its input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder as OpenAISSEDecoder

from gateway_client.sse import EventLimitExceeded, ServerSentEvent, SSEDecoder


def decode(data: bytes, *splits: int) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    start = 0
    for cut in [*splits, len(data)]:
        events += decoder.feed(data[start:cut])
        start = cut
    return events + decoder.close()


def every_split(data: bytes) -> list[list[ServerSentEvent]]:
    """Decoded whole, at every single split point, and one byte at a time."""
    results = [decode(data, cut) for cut in range(len(data) + 1)]
    results.append(decode(data, *range(1, len(data))))
    return results


def datas(data: bytes) -> list[str]:
    results = {tuple(e.data for e in events) for events in every_split(data)}
    assert len(results) == 1, f"split points disagree: {results}"
    return list(results.pop())


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        (b"data: a\n\ndata: b\n\n", ["a", "b"]),
        (b"data: a\r\n\r\ndata: b\r\n\r\n", ["a", "b"]),
        (b"data: a\r\rdata: b\r\r", ["a", "b"]),
        (b"data: a\r\n\ndata: b\n\r\n", ["a", "b"]),  # mixed line ends
        (b"\xef\xbb\xbfdata: bom\n\n", ["bom"]),  # a leading BOM is dropped
        (b"data: \xef\xbb\xbfkept\n\n", ["\ufeffkept"]),  # only a leading one
        (b": comment\ndata: x\n: another\n\n", ["x"]),
        (b"data:no-space\n\n", ["no-space"]),
        (b"data:  two spaces\n\n", [" two spaces"]),  # only one space is removed
        (b"data: one\ndata: two\ndata:\ndata: three\n\n", ["one\ntwo\n\nthree"]),
        (b"data\n\n", [""]),  # a field without colon: empty data line
        (b"data:\n\n", [""]),  # a bare data line dispatches empty data
        (b"event: x\n\n", []),  # no data line: not dispatched
        (b"id: 1\nretry: 10\nfoo: bar\ndata: y\n\n", ["y"]),
        (b"data: caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82\n\n", ["café — 🙂"]),
        (b"data: pending at end", ["pending at end"]),  # close() hands it over
        (b"data: [DONE]\n", ["[DONE]"]),
        (b"\n\n\ndata: after blank lines\n\n", ["after blank lines"]),
    ],
)
def test_whatwg_rules_at_every_split(stream: bytes, expected: list[str]) -> None:
    assert datas(stream) == expected


def test_fields_event_id_retry() -> None:
    events = decode(b"event: update\nid: 7\nretry: 1500\ndata: x\n\ndata: y\n\n")
    assert (events[0].event, events[0].id, events[0].retry) == ("update", "7", 1500)
    assert (events[1].event, events[1].id, events[1].retry) == ("message", "7", None)


def test_id_with_nul_is_ignored_and_bad_retry_too() -> None:
    events = decode(b"id: 1\n\nid: a\x00b\nretry: soon\ndata: x\n\n")
    assert (events[0].id, events[0].retry) == ("1", None)


def test_cr_at_end_of_read_then_lf_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert [e.data for e in decoder.feed(b"\n\r\n")] == ["a"]
    assert [e.data for e in decoder.feed(b"data: b\n\n")] == ["b"]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert datas(b"data: \xff\xfe ok\n\n") == ["\ufffd\ufffd ok"]


def test_line_cap_raises_with_the_events_before_it() -> None:
    decoder = SSEDecoder(max_line_bytes=64)
    with pytest.raises(EventLimitExceeded) as caught:
        decoder.feed(b"data: ok\n\ndata: " + b"x" * 100)
    assert [e.data for e in caught.value.events] == ["ok"]


def test_line_cap_holds_across_reads() -> None:
    decoder = SSEDecoder(max_line_bytes=64)
    decoder.feed(b"data: " + b"x" * 40)
    with pytest.raises(EventLimitExceeded):
        decoder.feed(b"x" * 40)


def test_event_cap_counts_many_lines() -> None:
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(EventLimitExceeded, match="event is larger"):
        decoder.feed(b"data: 0123456789\n" * 20)


# Properties -----------------------------------------------------------------------------------

line_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
event = st.lists(line_text, min_size=1, max_size=3)
ending = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    parts: list[bytes] = []
    expected: list[str] = []
    for lines in draw(st.lists(event, max_size=6)):
        end = draw(ending)
        if draw(st.booleans()):
            parts.append(b": keep-alive" + end)
        for line in lines:
            parts.append(b"data: " + line.encode() + end)
        parts.append(end)
        expected.append("\n".join(lines))
    return b"".join(parts), expected


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_resplit_gives_the_same_events(case: tuple[bytes, list[str]], cuts: list[int]) -> None:
    data, expected = case
    splits = sorted({min(cut, len(data)) for cut in cuts})
    assert [e.data for e in decode(data, *splits)] == expected


@settings(max_examples=200, deadline=None)
@given(streams(), st.integers(min_value=1, max_value=9))
def test_same_payloads_as_the_openai_sdk(case: tuple[bytes, list[str]], size: int) -> None:
    data, _ = case
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # the SDK's line splitting differs
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    theirs = [e.data for e in OpenAISSEDecoder().iter_bytes(iter(pieces))]
    ours = [e.data for e in decode(data, *range(size, len(data), size))]
    assert ours == theirs


# Any line the format has, in any read sizes: every field, the caps, a BOM and every line end.
any_line = st.one_of(
    st.builds(lambda text: b"data: " + text, st.sampled_from([b"{}", b"x", b"", b"\xff\xc3"])),
    st.builds(lambda text: b"data: " + text.encode(), line_text),
    st.just(b""),
    st.just(b""),
    st.sampled_from(
        [
            b"data:x",
            b"data",
            b"data:  two",
            b"event: update",
            b"event",
            b"id: 7",
            b"id: a\x00b",
            b"id",
            b"retry: 1500",
            b"retry: soon",
            b": keep-alive",
            b":",
            b"other: field",
            b"\xef\xbb\xbfdata: bom",
        ]
    ),
)


@st.composite
def any_streams(draw: st.DrawFn) -> bytes:
    ends = st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"])
    body = b"".join(line + draw(ends) for line in draw(st.lists(any_line, max_size=14)))
    if draw(st.booleans()):
        body = body.rstrip(b"\r\n")  # the last line unterminated
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + body


def outcome(data: bytes, cuts: list[int], **caps: int) -> tuple[list[ServerSentEvent], str]:
    """Every event, and the message of the cap that stopped decoding, if one did."""
    decoder = SSEDecoder(**caps)
    events: list[ServerSentEvent] = []
    start = 0
    try:
        for cut in [*cuts, len(data)]:
            events += decoder.feed(data[start:cut])
            start = cut
        events += decoder.close()
    except EventLimitExceeded as exc:
        return events + exc.events, str(exc)
    return events, ""


caps = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {"max_line_bytes": st.integers(4, 40), "max_event_bytes": st.integers(1, 60)}
    ),
)


@settings(max_examples=400, deadline=None)
@given(any_streams(), caps, st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_every_field_and_cap_is_the_same_at_every_split(
    data: bytes, limits: dict[str, int], cuts: list[int]
) -> None:
    expected = outcome(data, list(range(1, len(data))), **limits)
    assert outcome(data, [], **limits) == expected
    assert outcome(data, sorted({min(cut, len(data)) for cut in cuts}), **limits) == expected
    for cut in range(len(data) + 1):
        assert outcome(data, [cut], **limits) == expected, f"split at {cut}"
