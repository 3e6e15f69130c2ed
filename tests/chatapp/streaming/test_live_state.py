"""The pure fold behind deltas and snapshots: only what was shown, split at the last delta."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chatapp.streaming.live_blocks import BlockSettler
from chatapp.streaming.live_state import LiveState
from gateway_client.events import (
    Annotation,
    Artifact,
    AudioOutput,
    Finish,
    ImageOutput,
    Meta,
    ReasoningDelta,
    ReasoningDetail,
    TextDelta,
    ToolCallDelta,
    Usage,
)

events = st.lists(
    st.one_of(
        st.builds(TextDelta, st.text(max_size=5)),
        st.builds(ReasoningDelta, st.text(max_size=5)),
        st.builds(
            ToolCallDelta,
            st.integers(0, 2),
            st.none() | st.just("call"),
            st.none() | st.just("fn"),
            st.text(max_size=4),
        ),
        st.just(None),  # a tick: the worker takes a delta here
    ),
    max_size=60,
)


def rebuild(snapshot: dict, deltas: list[dict]) -> tuple[str, str, dict[int, str]]:
    content, reasoning = snapshot["content"], snapshot["reasoning"]
    args = {c["index"]: c["arguments"] for c in snapshot["tool_calls"]}
    for delta in deltas:
        content += delta.get("content", "")
        reasoning += delta.get("reasoning", "")
        for call in delta.get("tool_calls", []):
            args[call["index"]] = args.get(call["index"], "") + call["arguments"]
    return content, reasoning, args


@given(events, st.integers(0, 60))
def test_a_snapshot_plus_later_deltas_is_everything(items: list, cut: int) -> None:
    state = LiveState()
    deltas, snapshot = [], None
    for i, item in enumerate(items):
        if i == cut:
            snapshot = state.snapshot()
            deltas = []
        if item is None:
            delta = state.take_delta()
            if delta is not None:
                deltas.append(delta)
        else:
            state.apply(item)
    last = state.take_delta()
    if last is not None:
        deltas.append(last)
    snapshot = snapshot or {"seq": 0, "content": "", "reasoning": "", "tool_calls": []}
    assert [d["seq"] for d in deltas] == list(range(snapshot["seq"] + 1, state.seq + 1))
    texts = [e.text for e in items if isinstance(e, TextDelta)]
    thoughts = [e.text for e in items if isinstance(e, ReasoningDelta)]
    content, reasoning, args = rebuild(snapshot, deltas)
    assert content == "".join(texts) == state.content
    assert reasoning == "".join(thoughts) == state.reasoning
    assert args == {c["index"]: c["arguments"] for c in state.tool_calls()}


def test_nothing_pending_means_no_delta() -> None:
    state = LiveState()
    assert state.take_delta() is None
    # Not shown: these are the stream's Completion's to keep.
    state.apply(Meta(id="gen-1", model="m"))
    state.apply(ReasoningDetail({"type": "reasoning.encrypted", "data": "x"}))
    state.apply(Usage({"cost": 1}, None))
    state.apply(Finish("stop"))
    assert state.take_delta() is None
    assert state.seq == 0
    assert state.pending == []


def test_only_visible_output_is_queued() -> None:
    state = LiveState()
    assert state.apply(Meta(id="g", model=None)) is False
    assert state.apply(TextDelta("")) is False
    assert state.apply(ReasoningDelta("think")) is True
    assert state.apply(TextDelta("answer")) is True


def test_many_tokens_coalesce_into_one_delta() -> None:
    state = LiveState()
    for word in ["a", "b", "c"] * 100:
        state.apply(TextDelta(word))
    delta = state.take_delta()
    assert delta == {"seq": 1, "content": "abc" * 100}


def test_only_raster_images_are_announced() -> None:
    state = LiveState()
    assert not state.apply(ImageOutput(0, url="data:image/svg+xml;base64,PHN2Zz4="))
    assert not state.apply(ImageOutput(1, url="javascript:alert(1)"))
    # An image stream's picture is shown only if its bytes are a raster image (`image_checks`):
    # "iVBO" is not even a whole PNG signature. (Whole ones: test_image_previews.py.)
    assert not state.apply(ImageOutput(2, b64="iVBO", media_type="image/png", partial=True))
    assert not state.apply(ImageOutput(3, b64="iVBO", media_type="image/png"))
    assert state.take_delta() is None
    assert state.apply(ImageOutput(4, url="data:image/png;base64,iVBO"))
    assert state.take_delta() == {"seq": 1, "attachments": ["image"]}


def test_citations_and_media_reach_browsers_without_their_payloads() -> None:
    state = LiveState()
    raw = {"type": "url_citation", "url_citation": {"url": "https://e.example/", "title": "E"}}
    state.apply(Annotation("url_citation", "https://e.example/", "E", raw))
    state.apply(Artifact("file", "a.csv", "text/csv", "YSxi"))
    for _ in range(3):
        state.apply(AudioOutput("UklGRg==", "hello ", "wav"))
    delta = state.take_delta()
    assert delta == {
        "seq": 1,
        "annotations": [{"url": "https://e.example/", "title": "E"}],
        "attachments": ["file", "audio"],
    }
    state.apply(AudioOutput("UklGRg==", "again", "wav"))
    assert state.take_delta() is None, "audio is announced once"
    snapshot = state.snapshot()
    assert snapshot["attachments"] == ["file", "audio"]
    assert snapshot["annotations"] == delta["annotations"]
    assert "UklGRg" not in str(snapshot)


async def direct(function: Callable[..., Any], *args: object) -> object:
    return function(*args)  # the render pool's `run`, in this process


async def settled_now(state: LiveState) -> None:
    """Wait for the parse the last delta started, as the ticker's next tick would find it."""
    await state.blocks.step()


async def test_deltas_carry_each_settled_block_once_and_the_last_one_settles_the_rest() -> None:
    state = LiveState()
    state.blocks = BlockSettler(run=direct)
    state.apply(TextDelta("# Plan\n\nFirst"))
    first = state.take_delta()  # its parse starts: the delta does not wait for it
    state.apply(TextDelta(" step.\n\n- a\n"))
    await asyncio.sleep(0)
    second = state.take_delta()
    await asyncio.sleep(0)
    await state.finish_render()
    last = state.take_last_delta()
    assert first == {"seq": 1, "content": "# Plan\n\nFirst"}
    assert second == {
        "seq": 2,
        "content": " step.\n\n- a\n",
        "settled": [0, 7, "<h1>Plan</h1>\n"],
    }
    assert last == {"seq": 3, "settled": [7, 25, "<p>First step.</p>\n<ul>\n<li>a</li>\n</ul>\n"]}
    assert state.take_last_delta() is None  # nothing is left to settle or send
    html = "<h1>Plan</h1>\n<p>First step.</p>\n<ul>\n<li>a</li>\n</ul>\n"
    assert state.snapshot()["settled"] == [0, 25, html]
    assert state.final_render is not None
    assert state.final_render.html == html  # the whole answer, rendered once as it ended


def test_a_snapshot_says_how_long_the_model_has_thought_and_whether_it_is_over() -> None:
    state = LiveState()
    assert "thinking" not in state.snapshot(now=1.0)
    state.apply(ReasoningDelta("hmm"), now=10.0)
    assert state.snapshot(now=12.5)["thinking"] == [2500, False]
    state.apply(TextDelta("Answer"), now=14.0)
    assert state.snapshot(now=20.0)["thinking"] == [4000, True]
    assert state.thinking_ms(now=99.0) == 4000
