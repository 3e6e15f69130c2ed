"""The websocket and channel-layer messages: exact shapes, the compact delta, and its decoding."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from chatapp.messaging import socket_messages
from chatapp.streaming.live_state import LiveState
from gateway_client.events import ReasoningDelta, TextDelta, ToolCallDelta


def test_group_name() -> None:
    assert socket_messages.group_name(42) == "conversation.42"


def test_group_message_is_encoded_once_as_compact_json() -> None:
    message = socket_messages.group_message({"t": "updated", "g": 3, "text": "é ✓"})
    assert message == {"type": "chat.forward", "text": '{"t":"updated","g":3,"text":"é ✓"}'}
    assert socket_messages.group_message([3, 1, "Hi"]) == {
        "type": "chat.forward",
        "text": '[3,1,"Hi"]',
    }


@pytest.mark.parametrize(
    ("fields", "payload"),
    [
        ({"seq": 1, "content": "Hi"}, [7, 1, "Hi"]),
        ({"seq": 2, "reasoning": "hm"}, [7, 2, "", "hm"]),
        ({"seq": 3, "content": "a", "reasoning": "b"}, [7, 3, "a", "b"]),
        (
            {"seq": 4, "tool_calls": [{"index": 0, "name": "f"}]},
            [7, 4, "", "", {"tool_calls": [{"index": 0, "name": "f"}]}],
        ),
        (
            {"seq": 5, "content": "x", "annotations": [{"url": "u", "title": "t"}]},
            [7, 5, "x", "", {"annotations": [{"url": "u", "title": "t"}]}],
        ),
        (
            {"seq": 6, "attachments": ["image", "file"], "tool_calls": [{"index": 1}]},
            [7, 6, "", "", {"tool_calls": [{"index": 1}], "attachments": ["image", "file"]}],
        ),
    ],
)
def test_delta_is_a_bare_array_without_trailing_empty_parts(
    fields: dict[str, Any], payload: list[Any]
) -> None:
    assert socket_messages.delta(7, fields) == payload
    text = socket_messages.group_message(socket_messages.delta(7, fields))["text"]
    assert socket_messages.decode(text) == {"t": "delta", "g": 7, **fields}
    assert socket_messages.decode(text.encode()) == {"t": "delta", "g": 7, **fields}


def test_a_live_states_delta_decodes_to_what_it_took() -> None:
    state = LiveState()
    state.apply(TextDelta("Hello "))
    state.apply(ReasoningDelta("thinking"))
    state.apply(ToolCallDelta(0, "call_1", "get_weather", '{"city"'))
    taken = state.take_delta()
    assert taken is not None
    text = socket_messages.group_message(socket_messages.delta(9, taken))["text"]
    assert orjson.loads(text)[:4] == [9, 1, "Hello ", "thinking"]
    assert socket_messages.decode(text) == {"t": "delta", "g": 9, **taken}


def test_objects_decode_as_they_are() -> None:
    done = socket_messages.done(5, 12, "completed")
    assert socket_messages.decode(socket_messages.group_message(done)["text"]) == done


def test_browser_bound_payloads() -> None:
    fields = {"seq": 4, "content": "so far", "reasoning": "", "tool_calls": []}
    assert socket_messages.snapshot(5, fields) == {
        "t": "snapshot",
        "g": 5,
        "seq": 4,
        "content": "so far",
        "reasoning": "",
        "tool_calls": [],
    }
    assert socket_messages.done(5, 12, "cancelled") == {
        "t": "done",
        "g": 5,
        "seq": 12,
        "status": "cancelled",
    }
    assert socket_messages.updated(5) == {"t": "updated", "g": 5}
    assert socket_messages.not_found(8) == {"t": "gone", "c": 8}
    assert socket_messages.watching(8) == {"t": "watching", "c": 8}


def test_worker_bound_messages_name_the_generation() -> None:
    assert socket_messages.cancel(5) == {"type": "generation.cancel", "g": 5}
    assert socket_messages.snapshot_request(5, "specific.abc!def") == {
        "type": "generation.snapshot",
        "g": 5,
        "reply_to": "specific.abc!def",
    }


@pytest.mark.parametrize(
    ("phase", "words"),
    [
        ("first_token", "The gateway did not start answering in time (no first token in 5 s)."),
        ("idle", "The answer stalled: the gateway went quiet (no first token in 5 s)."),
        ("total", "The answer took longer than the time allowed (no first token in 5 s)."),
        ("connect", "Could not reach the gateway in time (no first token in 5 s)."),
    ],
)
def test_timeout_message_per_phase(phase: Any, words: str) -> None:
    assert socket_messages.timeout_message(phase, "no first token in 5 s") == words


def test_a_long_delta_goes_as_frames_of_bounded_text_numbered_in_order() -> None:
    """Nothing lost, nothing twice: the frames' text joins up to the delta's, reasoning and
    content each in order, and the extras (a settled block that may end in the last frame's
    text) come with the last, which carries the delta's number."""
    bound = socket_messages.MAX_FRAME_TEXT
    reasoning = "why 🤔 " * (bound // 3)
    content = "".join(f"row {n} 😀\n" for n in range(6000))
    state = LiveState()
    state.apply(TextDelta("first"))
    assert state.take_delta() is not None
    state.apply(ReasoningDelta(reasoning))
    state.apply(TextDelta(content))
    state.apply(ToolCallDelta(0, "call_1", "clock", "{}"))
    taken = state.take_delta()
    assert taken is not None
    frames = socket_messages.delta_frames(9, taken)
    assert len(frames) == socket_messages.frame_count(taken) > 2
    decoded = [socket_messages.decode(orjson.dumps(frame)) for frame in frames]
    assert [message["seq"] for message in decoded] == list(range(2, state.seq + 1))
    assert all(len(m.get("content", "")) + len(m.get("reasoning", "")) <= bound for m in decoded)
    assert "".join(m.get("reasoning", "") for m in decoded) == reasoning
    assert "".join(m.get("content", "") for m in decoded) == content
    assert [bool(m.get("tool_calls")) for m in decoded] == [False] * (len(frames) - 1) + [True]
    assert state.snapshot()["seq"] == decoded[-1]["seq"]  # a snapshot follows the last frame
    small = {"seq": 3, "content": "hi"}
    assert socket_messages.delta_frames(9, small) == [socket_messages.delta(9, small)]


@pytest.mark.parametrize("text", [0, 100, 16_384 - 100, 16_384 + 100])
def test_a_settled_chunk_that_does_not_fit_beside_the_text_goes_in_a_frame_of_its_own(
    text: int,
) -> None:
    """A settled chunk's and a draft's HTML (each at most `MAX_FRAME_TEXT`, `live_blocks`)
    count with the text: where they would not fit beside it they follow in a frame of their
    own, after all the text, and `frame_count` numbers it (#45 point 5)."""
    bound = socket_messages.MAX_FRAME_TEXT
    fields: dict[str, object] = {"seq": 7, "settled": [0, 5, "x" * (bound // 2)]}
    fields |= {"draft": [5, 9, "y" * (bound // 4)]} | ({"content": "c" * text} if text else {})
    frames = socket_messages.delta_frames(9, fields)
    assert len(frames) == socket_messages.frame_count(fields)
    decoded = [socket_messages.decode(orjson.dumps(frame)) for frame in frames]
    assert [m["seq"] for m in decoded] == list(range(8 - len(frames), 8))
    assert "".join(m.get("content", "") for m in decoded) == "c" * text
    assert all(len(orjson.dumps(frame)) <= bound + 100 for frame in frames)
    assert [("settled" in m, "draft" in m) for m in decoded][-1] == (True, True)
    assert sum("settled" in m for m in decoded) == 1
