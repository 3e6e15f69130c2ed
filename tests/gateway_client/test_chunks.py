"""Chunk → events for every dialect, folded by the accumulator, fed through the parser."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from gateway_client.accumulator import MAX_UNREAD, Accumulator
from gateway_client.chunks import citation_url, error_info, parse_annotation, parse_chunk
from gateway_client.events import Annotation, ErrorEvent, ReasoningDelta, TextDelta, Unread
from gateway_client.stream_parser import EventStreamParser


def delta(**fields: Any) -> dict[str, Any]:
    return {"id": "g", "choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def fold(*chunks: dict[str, Any] | str, split: int | None = None) -> Any:
    body = b"".join(
        b"data: " + (c if isinstance(c, str) else json.dumps(c)).encode() + b"\n\n" for c in chunks
    )
    parser = EventStreamParser()
    accumulator = Accumulator()
    step = split or len(body)
    for start in range(0, len(body), step):
        for event in parser.feed(body[start : start + step]):
            accumulator.add(event)
    for event in parser.close():
        accumulator.add(event)
    return accumulator.completion


def test_numes_reasoning_is_read_once_and_details_kept_in_order() -> None:
    signature = {"type": "reasoning.text", "signature": "sig==", "format": "anthropic-claude-v1"}
    encrypted = {"type": "reasoning.encrypted", "data": "opaque"}
    completion = fold(
        delta(reasoning="Think ", reasoning_details=[{"type": "reasoning.text", "text": "Think "}]),
        delta(reasoning="more.", reasoning_details=[{"type": "reasoning.text", "text": "more."}]),
        delta(reasoning_details=[signature]),
        delta(reasoning_details=[encrypted]),
        delta(content="Answer"),
        "[DONE]",
    )
    assert completion.reasoning == "Think more."
    assert completion.content == "Answer"
    assert completion.reasoning_details == [
        {"type": "reasoning.text", "text": "Think "},
        {"type": "reasoning.text", "text": "more."},
        signature,
        encrypted,
    ]


def test_details_alone_give_visible_reasoning_but_never_encrypted_data() -> None:
    completion = fold(
        delta(reasoning_details=[{"type": "reasoning.summary", "summary": "Plan: "}]),
        delta(reasoning_details=[{"type": "reasoning.text", "text": "step"}]),
        delta(reasoning_details=[{"type": "reasoning.encrypted", "data": "secret"}]),
    )
    assert completion.reasoning == "Plan: step"


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_either_reasoning_field_is_accepted_apart_from_content(field: str) -> None:
    completion = fold(delta(**{field: "why"}), delta(content="what"), "[DONE]")
    assert (completion.reasoning, completion.content) == ("why", "what")


def test_interleaved_tool_calls_are_assembled_by_index() -> None:
    def call(index: int, **fields: Any) -> dict[str, Any]:
        return delta(tool_calls=[{"index": index, **fields}])

    completion = fold(
        call(1, id="b", type="function", function={"name": "second"}),
        call(0, id="a", type="function", function={"name": "first", "arguments": '{"x"'}),
        call(1, function={"arguments": '{"y": 2}'}),
        call(0, function={"arguments": ": 1}"}),
        {"id": "g", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        "[DONE]",
    )
    assert [c.to_dict() for c in completion.tool_calls] == [
        {"index": 0, "id": "a", "name": "first", "arguments": '{"x": 1}'},
        {"index": 1, "id": "b", "name": "second", "arguments": '{"y": 2}'},
    ]
    assert completion.finish_reason == "stop"


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://example.com/a", True),
        ("http://example.com/a", True),
        ("HTTPS://example.com/a", True),
        ("javascript:alert(1)", False),
        ("data:text/html,<script>", False),
        ("ftp://example.com", False),
        (" https://example.com", False),
        ("https://example.com/" + "a" * 8172, True),  # exactly 8,192 bytes
        ("https://example.com/" + "a" * 8173, False),
        ("https://example.com/" + "é" * 4087, False),  # over 8,192 UTF-8 bytes
        ("https://exa\nmple.com", False),
    ],
)
def test_citation_urls_are_checked(url: str, kept: bool) -> None:
    assert (citation_url(url) is not None) is kept
    annotation = {"type": "url_citation", "url_citation": {"url": url, "title": "T"}}
    completion = fold(delta(content="x", annotations=[annotation]))
    expected = [Annotation("url_citation", url, "T", annotation)] if kept else []
    assert completion.annotations == expected
    assert completion.to_dict()["annotations"] == [annotation] * kept


def test_file_citation_without_url_is_kept() -> None:
    annotation = {"type": "file_citation", "file_citation": {"file_id": "f1", "filename": "a.pdf"}}
    completion = fold(delta(annotations=[annotation]))
    assert completion.annotations == [Annotation("file_citation", None, "a.pdf", annotation)]
    assert completion.to_dict()["annotations"] == [annotation]


@pytest.mark.parametrize(
    ("entry", "url", "title"),
    [
        # the body named by `type`
        (
            {"type": "url_citation", "url_citation": {"url": "https://a.test/", "title": "A"}},
            "https://a.test/",
            "A",
        ),
        # `url_citation` when `type` names no body
        (
            {"type": "citation", "url_citation": {"url": "https://b.test/", "title": "B"}},
            "https://b.test/",
            "B",
        ),
        ({"url_citation": {"url": "https://c.test/", "title": "C"}}, "https://c.test/", "C"),
        # else the entry itself
        ({"type": "citation", "url": "https://d.test/", "title": "D"}, "https://d.test/", "D"),
        ({"type": "file", "filename": "e.pdf"}, None, "e.pdf"),
        ({"type": "citation", "url": "https://f.test/", "title": 7}, "https://f.test/", None),
    ],
)
def test_citations_are_read_from_the_body_the_app_reads(
    entry: dict[str, Any], url: str | None, title: str | None
) -> None:
    annotation = parse_annotation(entry)
    assert annotation is not None
    assert (annotation.url, annotation.title, annotation.raw) == (url, title, entry)


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "url_citation", "url_citation": {"title": "no link"}},
        {"url_citation": {"title": "no link"}},
        {"type": "citation", "url_citation": {"url": "javascript:alert(1)"}},
        {"type": "citation", "url": 42},
    ],
)
def test_citations_without_a_followable_link_are_dropped(entry: dict[str, Any]) -> None:
    assert parse_annotation(entry) is None
    assert fold(delta(content="x", annotations=[entry])).annotations == []


@pytest.mark.parametrize(
    ("usage", "cost"),
    [
        ({"cost": 0.25}, {"amount": 0.25, "unit": "credits", "estimated": False}),
        ({"cost": 0}, {"amount": 0, "unit": "credits", "estimated": False}),
        ({"x_llm_cost_micro": 7}, {"amount": 7, "unit": "micro_usd", "estimated": False}),
        (
            {"x_llm_cost_micro": 9, "x_llm_usage_estimated": True},
            {"amount": 9, "unit": "micro_usd", "estimated": True},
        ),
        ({"prompt_tokens": 1}, None),
    ],
)
def test_usage_cost_units(usage: dict[str, Any], cost: dict[str, Any] | None) -> None:
    completion = fold({"id": "g", "choices": [], "usage": usage}, "[DONE]")
    assert completion.usage == usage
    assert (completion.cost.to_dict() if completion.cost else None) == cost


def test_usage_token_details() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "completion_tokens_details": {"reasoning_tokens": 15},
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    completion = fold({"id": "g", "choices": [], "usage": usage})
    assert (completion.prompt_tokens, completion.completion_tokens) == (10, 20)
    assert (completion.reasoning_tokens, completion.cached_tokens) == (15, 4)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {"code": 503, "message": "gone", "metadata": {"error_type": "provider_unavailable"}},
            (503, 503, "provider_unavailable", "gone"),
        ),
        (
            {"type": "provider_error", "code": "stream_interrupted", "message": "lost"},
            (None, "stream_interrupted", "provider_error", "lost"),
        ),
        ({"code": 504, "message": "idle"}, (504, 504, None, "idle")),
        (
            {"code": "provider_unavailable", "message": "down", "status": 503},
            (503, "provider_unavailable", "provider_unavailable", "down"),
        ),
        ("plain words", (None, None, None, "plain words")),
        (
            {
                "code": "tool_use_failed",
                "type": "invalid_request_error",
                "message": "m",
                "status_code": 400,
            },
            (400, "tool_use_failed", "invalid_request_error", "m"),
        ),
        ({"code": 500, "status": 503, "message": "m"}, (503, 500, None, "m")),
        ({"code": 500, "status_code": 502, "message": "m"}, (502, 500, None, "m")),
        ({"status": 429, "status_code": 400, "message": "m"}, (429, None, None, "m")),
        ({"code": 100, "message": "m"}, (100, 100, None, "m")),
        ({"code": 599, "message": "m"}, (599, 599, None, "m")),
        ({"code": 99, "message": "m"}, (None, 99, None, "m")),
        ({"code": 600, "message": "m"}, (None, 600, None, "m")),
        ({"code": -32000, "message": "m"}, (None, -32000, None, "m")),
        ({"code": True, "message": "m"}, (None, None, None, "m")),
        ({"code": 503, "status": True, "message": "m"}, (503, 503, None, "m")),
        ({"code": "503", "message": "m"}, (None, "503", None, "m")),
        ({"code": 500, "status": 0, "status_code": "502", "message": "m"}, (500, 500, None, "m")),
    ],
)
def test_every_error_shape(error: Any, expected: tuple[Any, ...]) -> None:
    info = error_info(error)
    assert (info.status, info.code, info.type, info.message) == expected


def test_error_is_checked_before_choices_and_ends_the_stream() -> None:
    chunk = {
        "id": "g",
        "error": {"code": 503, "message": "gone"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    events = parse_chunk(chunk)
    assert isinstance(events[0], ErrorEvent)
    completion = fold(delta(content="part"), chunk, delta(content="ignored"), "[DONE]")
    assert completion.outcome == "error"
    assert completion.finish_reason == "error"
    assert completion.content == "part"


def test_text_completion_chunks() -> None:
    chunk = {
        "object": "text_completion",
        "choices": [{"index": 0, "text": "Once", "finish_reason": None}],
    }
    assert parse_chunk(chunk) == [TextDelta("Once")]


def test_image_stream_frames() -> None:
    completion = fold(
        {
            "type": "image_generation.partial",
            "index": 0,
            "b64_json": "AAA",
            "media_type": "image/png",
        },
        {
            "type": "image_generation.completed",
            "index": 0,
            "b64_json": "BBB",
            "media_type": "image/png",
        },
        {"type": "image_generation.usage", "usage": {"output_images": 1, "cost": 0.04}},
        "[DONE]",
    )
    assert [(i.b64, i.partial) for i in completion.images] == [("BBB", False)]
    assert completion.cost is not None
    assert completion.cost.amount == 0.04
    assert completion.outcome == "complete"


def test_image_error_frame() -> None:
    frame = {
        "type": "image_generation.error",
        "error": {"code": "provider_unavailable", "message": "down", "status": 503},
    }
    completion = fold(frame, "[DONE]")
    assert completion.outcome == "error"
    assert completion.error is not None
    assert (completion.error.status, completion.error.code) == (503, "provider_unavailable")


def test_chat_images_artifacts_and_audio() -> None:
    pcm = b"\x00\x01" * 8
    half = len(pcm) // 2
    completion = fold(
        delta(
            images=[
                {"index": 0, "type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
            ]
        ),
        delta(
            artifacts=[
                {"type": "file", "filename": "a.csv", "media_type": "text/csv", "data": "YQ=="}
            ]
        ),
        delta(
            audio={
                "data": base64.b64encode(pcm[:half]).decode(),
                "transcript": "Hel",
                "format": "wav",
            }
        ),
        delta(audio={"data": base64.b64encode(pcm[half:]).decode(), "transcript": "lo"}),
    )
    assert completion.images[0].url == "data:image/png;base64,AA"
    assert completion.artifacts[0].filename == "a.csv"
    assert completion.audio is not None
    assert base64.b64decode(completion.audio.data) == pcm
    assert (completion.audio.transcript, completion.audio.format) == ("Hello", "wav")


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]", '"text"', "42"])
def test_a_payload_that_is_not_a_json_object_is_a_protocol_error(payload: str) -> None:
    completion = fold(delta(content="kept"), payload, delta(content="lost"), "[DONE]")
    assert completion.outcome == "error"
    assert completion.error is not None
    assert completion.error.type == "protocol_error"
    assert completion.content == "kept"


def test_cut_off_final_event_is_incomplete_not_an_error() -> None:
    parser = EventStreamParser()
    accumulator = Accumulator()
    for event in parser.feed(
        b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\ndata: {"cho'
    ):
        accumulator.add(event)
    for event in parser.close():
        accumulator.add(event)
    assert accumulator.completion.outcome == "incomplete"
    assert accumulator.completion.content == "a"


def test_done_without_blank_line_at_end_still_counts() -> None:
    parser = EventStreamParser()
    events = parser.feed(b"data: [DONE]") + parser.close()
    assert parser.done
    assert len(events) == 1


def test_empty_reasoning_is_not_an_event() -> None:
    assert not any(
        isinstance(e, ReasoningDelta) for e in parse_chunk(delta(reasoning="", content="x"))
    )


def test_an_explicit_status_wins_over_the_error_object() -> None:
    assert error_info({"code": 503, "status_code": 502, "message": "m"}, status=429).status == 429


def test_content_parts_are_read_in_order_mixed_with_strings() -> None:
    completion = fold(
        delta(role="assistant", content=""),
        delta(content=[{"type": "thinking", "thinking": [{"type": "text", "text": "Hm, "}]}]),
        delta(content=[{"type": "thinking", "thinking": "yes.", "closed": True}]),
        delta(
            content=[
                {"type": "thinking", "thinking": [{"type": "text", "text": " Go."}]},
                {"type": "text", "text": "A"},
            ]
        ),
        delta(content="B"),
        delta(content=[{"type": "text", "text": "C"}, {"type": "text", "text": ""}]),
        "[DONE]",
    )
    assert (completion.reasoning, completion.content) == ("Hm, yes. Go.", "ABC")
    assert (completion.warnings, completion.unread) == ((), [])


def test_a_delta_of_parts_gives_events_in_part_order() -> None:
    chunk = delta(
        content=[
            {"type": "text", "text": "a"},
            {"type": "thinking", "thinking": [{"type": "text", "text": "b"}, {"type": "text"}]},
            {"type": "text", "text": "c"},
            {"type": "thinking", "thinking": None},
        ]
    )
    assert parse_chunk(chunk) == [TextDelta("a"), ReasoningDelta("b"), TextDelta("c")]


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_ref", "id": "i1"},
        {"text": "no type"},
        {"type": "text", "text": 5},
        {"type": "thinking", "thinking": {"text": "a dict"}},
        "a bare string part",
    ],
)
def test_a_part_we_do_not_read_is_kept_not_shown(part: Any) -> None:
    completion = fold(delta(content=[{"type": "text", "text": "shown"}, part]), "[DONE]")
    assert completion.content == "shown"
    assert completion.unread == [{"field": "content", "value": part}]
    assert completion.warnings == ()  # there is an answer


def test_a_part_nested_in_thinking_that_is_not_text_is_kept() -> None:
    inner = {"type": "thinking", "thinking": "nested"}
    chunk = delta(content=[{"type": "thinking", "thinking": [inner]}])
    assert parse_chunk(chunk) == [Unread("content", inner)]


def test_unknown_part_types_are_logged_once_per_stream(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="gateway_client.accumulator")
    chunks = [
        delta(content=[{"type": "chart", "id": 1}]),
        delta(content=[{"type": "chart", "id": 2}, {"type": "table"}]),
        delta(content={"type": "single"}),
        "[DONE]",
    ]
    completion = fold(*chunks)
    records = [r for r in caplog.records if r.name == "gateway_client.accumulator"]
    assert len(records) == 1
    assert "'chart'" in records[0].getMessage()
    assert len(completion.unread) == 4
    fold(*chunks)
    assert len([r for r in caplog.records if r.name == "gateway_client.accumulator"]) == 2


def test_unknown_keys_are_kept_but_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gateway_client.accumulator")
    completion = fold(delta(content="a", x_trace="t1"), "[DONE]")
    assert completion.unread == [{"field": "x_trace", "value": "t1"}]
    assert caplog.records == []


@pytest.mark.parametrize(
    ("fields", "unread"),
    [
        ({"output_text": "hidden"}, ("output_text", "hidden")),
        (
            {"content": {"type": "text", "text": "one"}},
            ("content", {"type": "text", "text": "one"}),
        ),
        ({"content": 42}, ("content", 42)),
        (
            {"content": [{"type": "audio_ref", "id": "a"}]},
            ("content", {"type": "audio_ref", "id": "a"}),
        ),
        ({"refusal": "I cannot help with that."}, ("refusal", "I cannot help with that.")),
        ({"function_call": {"name": "f"}}, ("function_call", {"name": "f"})),
    ],
)
def test_a_complete_empty_answer_that_skipped_something_warns(
    fields: dict[str, Any], unread: tuple[str, Any]
) -> None:
    completion = fold(delta(role="assistant"), delta(**fields), "[DONE]")
    assert (completion.outcome, completion.content) == ("complete", "")
    assert completion.warnings == ("unread_parts",)
    assert completion.unread == [{"field": unread[0], "value": unread[1]}]
    assert completion.to_dict()["warnings"] == ["unread_parts"]
    assert completion.to_dict()["unread"] == completion.unread


@pytest.mark.parametrize(
    "fields",
    [
        {"role": "assistant", "content": None, "refusal": None, "function_call": None},
        {"tool_calls": None, "reasoning_content": None, "audio": None, "annotations": []},
        {"channel": "analysis", "token_id": 1234, "index": 0},
        {"content": [], "extra": "", "other": {}, "more": 0, "flag": False},
    ],
)
def test_keys_that_carry_nothing_do_not_count(fields: dict[str, Any]) -> None:
    completion = fold(delta(**fields), "[DONE]")
    assert (completion.warnings, completion.unread) == ((), [])


@pytest.mark.parametrize(
    "output",
    [
        delta(reasoning="thought"),
        delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}]),
        delta(images=[{"image_url": {"url": "data:image/png;base64,AA"}}]),
        delta(audio={"data": "", "transcript": "", "format": "wav"}),
    ],
)
def test_any_output_means_no_warning(output: dict[str, Any]) -> None:
    completion = fold(delta(output_text="hidden"), output, "[DONE]")
    assert completion.unread
    assert completion.warnings == ()


def test_only_a_complete_stream_warns() -> None:
    assert fold(delta(output_text="hidden")).outcome == "incomplete"
    assert fold(delta(output_text="hidden")).warnings == ()
    failed = fold(delta(output_text="hidden"), {"error": {"message": "boom"}})
    assert (failed.outcome, failed.warnings) == ("error", ())


def test_unread_entries_are_capped() -> None:
    completion = fold(*(delta(output_text=str(n)) for n in range(MAX_UNREAD + 5)), "[DONE]")
    assert len(completion.unread) == MAX_UNREAD
    assert completion.unread[-1] == {"field": "output_text", "value": str(MAX_UNREAD - 1)}
    assert completion.warnings == ("unread_parts",)


@pytest.mark.parametrize("split", [1, 7])
def test_parts_and_warnings_survive_any_split(split: int) -> None:
    chunks = [
        delta(content=[{"type": "thinking", "thinking": "é…"}, {"type": "text", "text": "ü"}]),
        delta(content=[{"type": "mystery"}]),
        "[DONE]",
    ]
    whole = fold(*chunks)
    assert fold(*chunks, split=split) == whole
    assert (whole.reasoning, whole.content, len(whole.unread)) == ("é…", "ü", 1)
