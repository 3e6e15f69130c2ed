"""Inline `<think>` reasoning, split across deltas at every possible point."""

from __future__ import annotations

from itertools import combinations, pairwise

import pytest

from gateway_client.events import Event, Finish, ReasoningDelta, TextDelta
from gateway_client.think_tags import ThinkTags


def run(pieces: list[str], *, end: Event | None = None) -> tuple[str, str, list[Event]]:
    tags = ThinkTags()
    events: list[Event] = []
    for piece in pieces:
        events += tags.feed([TextDelta(piece)])
    if end is not None:
        events += tags.feed([end])
    events += tags.close()
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    return answer, thought, events


def splits(text: str, cuts: int) -> list[list[str]]:
    """`text` cut at every combination of `cuts` positions."""
    result = []
    for points in combinations(range(1, len(text)), cuts):
        bounds = (0, *points, len(text))
        result.append([text[a:b] for a, b in pairwise(bounds)])
    return result


CASES = [
    ("<think>Weigh it.</think>\n\nThe answer.", "The answer.", "Weigh it."),
    ("  \n<thinking>a < b</thinking>Yes.", "Yes.", "a < b"),
    ("<think>unclosed thought", "", "unclosed thought"),
    ("<think></think>Straight on.", "Straight on.", ""),
    ("Plain <think>not a tag here</think>", "Plain <think>not a tag here</think>", ""),
    ("<thin ice is thin", "<thin ice is thin", ""),
    ("<b>bold</b> start", "<b>bold</b> start", ""),
    ("<think>x</thinking> y </think>z", "z", "x</thinking> y "),
    # The tags' own line breaks are not the thought's; those within it are.
    ("<think>\nWeigh it.\n</think>\n\nThe answer.", "The answer.", "Weigh it."),
    ("<think>\r\n\r\nA\n\nB \r\n\n</think>Yes.", "Yes.", "A\n\nB "),
    ("<think>\n\n</think>Straight on.", "Straight on.", ""),
    ("<think>\nunclosed\n", "", "unclosed\n"),
]


@pytest.mark.parametrize(("text", "answer", "thought"), CASES)
def test_every_split_point_gives_the_same_answer_and_thought(
    text: str, answer: str, thought: str
) -> None:
    for cuts in (0, 1, 2):
        for pieces in splits(text, cuts) if cuts else [[text]]:
            got_answer, got_thought, _ = run(pieces)
            assert (got_answer, got_thought) == (answer, thought), pieces


def test_one_character_at_a_time() -> None:
    text = "<think>step one\nstep two</think>\n\nDone."
    assert run(list(text))[:2] == ("Done.", "step one\nstep two")


def test_text_is_held_only_while_it_may_be_a_tag() -> None:
    tags = ThinkTags()
    assert tags.feed([TextDelta("Hello")]) == [TextDelta("Hello")], "not a tag: at once"
    tags = ThinkTags()
    assert tags.feed([TextDelta("<thi")]) == []
    assert tags.feed([TextDelta("nk>I")]) == [ReasoningDelta("I")]
    assert tags.feed([TextDelta(" see</th")]) == [ReasoningDelta(" see")]
    assert tags.feed([TextDelta("ink>Answer")]) == [TextDelta("Answer")]
    assert tags.state == "answer"


def test_line_breaks_in_the_thought_are_held_only_until_more_of_it_comes() -> None:
    tags = ThinkTags()
    assert tags.feed([TextDelta("<think>\n")]) == []
    assert tags.feed([TextDelta("One.\n\n")]) == [ReasoningDelta("One.")]
    assert tags.feed([TextDelta("Two.\n</thi")]) == [ReasoningDelta("\n\nTwo.")]
    assert tags.feed([TextDelta("nk>\nAnswer")]) == [TextDelta("Answer")]


def test_other_events_keep_their_place_after_held_text() -> None:
    finish = Finish("stop")
    _, _, events = run(["<thi"], end=finish)
    assert events == [TextDelta("<thi"), finish]
    _, _, events = run(["<think>half </thi"], end=finish)
    assert events == [ReasoningDelta("half "), ReasoningDelta("</thi"), finish]
