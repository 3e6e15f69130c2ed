"""gpt-oss's harmony channels in the content, split across deltas at every possible point."""

from __future__ import annotations

import pytest

from gateway_client.events import Event, Finish, ReasoningDelta, TextDelta
from gateway_client.harmony_tags import HarmonyTags
from tests.gateway_client.test_think_tags import splits


def run(pieces: list[str], *, end: Event | None = None) -> tuple[str, str, list[Event]]:
    tags = HarmonyTags()
    events: list[Event] = []
    for piece in pieces:
        events += tags.feed([TextDelta(piece)])
    if end is not None:
        events += tags.feed([end])
    events += tags.close()
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    return answer, thought, events


LONG = "x" * 65
CASES = [
    (
        "<|channel|>analysis<|message|>Hm.<|start|>assistant<|channel|>final<|message|>Hi.",
        "Hi.",
        "Hm.",
    ),
    (
        "<|channel|>analysis<|message|>a<|end|>\n<|start|>assistant<|channel|>final<|message|>b<|return|>",
        "b",
        "a",
    ),
    (
        " <|start|>assistant<|channel|>commentary to=f <|constrain|>json<|message|>{}<|call|>",
        "",
        "{}",
    ),
    ("<|start|>assistant<|message|>No channel.", "No channel.", ""),
    ("<|channel|>final<|message|>a <|b and <|end", "a <|b and <|end", ""),
    ("Plain <|channel|>final<|message|>text", "Plain <|channel|>final<|message|>text", ""),
    ("<|chant and <|start|", "<|chant and <|start|", ""),
    ("<|channel|>analysis", "<|channel|>analysis", ""),
    (f"<|channel|>{LONG}<|message|>x", f"<|channel|>{LONG}<|message|>x", ""),
    ("<|channel|>analysis<|message|>t<|end|><|start|>assistant<|chan", "", "t"),
    ("<|channel|>analysis<|message|>t<|end|> stray", "stray", "t"),
]


@pytest.mark.parametrize(("text", "answer", "thought"), CASES)
def test_every_split_point_gives_the_same_answer_and_thought(
    text: str, answer: str, thought: str
) -> None:
    for cuts in (0, 1, 2):
        for pieces in splits(text, cuts) if cuts else [[text]]:
            got_answer, got_thought, _ = run(pieces)
            assert (got_answer, got_thought) == (answer, thought), pieces


def test_tags_arriving_whole_as_llama_server_sends_them() -> None:
    pieces = ["<|channel|>", "analysis", "<|message|>", "User", " says", "<|start|>"]
    pieces += ["assistant", "<|channel|>", "final", "<|message|>", "Got", " it!"]
    assert run(pieces)[:2] == ("Got it!", "User says")


def test_text_is_held_only_while_it_may_be_a_tag() -> None:
    tags = HarmonyTags()
    assert tags.feed([TextDelta("Hello")]) == [TextDelta("Hello")], "not a tag: at once"
    tags = HarmonyTags()
    assert tags.feed([TextDelta("<|chan")]) == []
    assert tags.feed([TextDelta("nel|>analysis")]) == []
    assert tags.feed([TextDelta("<|message|>I")]) == [ReasoningDelta("I")]
    assert tags.feed([TextDelta(" see<|st")]) == [ReasoningDelta(" see")]
    assert tags.feed([TextDelta("art|>assistant<|channel|>final<|message|>A")]) == [TextDelta("A")]
    assert tags.feed([TextDelta("nswer <| ok")]) == [TextDelta("nswer <| ok")]
    assert tags.state == "message"


def test_an_oversize_header_is_given_back_as_the_answer_at_once() -> None:
    tags = HarmonyTags()
    assert tags.feed([TextDelta("<|channel|>")]) == []
    assert tags.feed([TextDelta("y" * 64)]) == [], "64 characters may still be a name"
    assert tags.feed([TextDelta("y")]) == [TextDelta("<|channel|>" + "y" * 65)]
    assert tags.state == "answer"
    tags = HarmonyTags()
    words = "<|start|>" + " a" * 200
    assert tags.feed([TextDelta(words)]) == [TextDelta(words)], "past the header's bound"


def test_leading_whitespace_is_bounded_too() -> None:
    tags = HarmonyTags()
    assert tags.feed([TextDelta("\n" * 256)]) == []
    assert tags.feed([TextDelta("\n")]) == [TextDelta("\n" * 257)]


def test_other_events_keep_their_place_after_held_text() -> None:
    finish = Finish("stop")
    _, _, events = run(["<|chan"], end=finish)
    assert events == [TextDelta("<|chan"), finish]
    _, _, events = run(["<|channel|>analysis<|message|>half <|en"], end=finish)
    assert events == [ReasoningDelta("half "), ReasoningDelta("<|en"), finish]
