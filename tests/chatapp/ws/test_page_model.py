"""`chatapp.ws.page_model` against the stream vectors that `static/chatapp/stream_state.js` passes
too (`tests/vectors/stream/README.md` says what a vector holds)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from chatapp.ws import page_model
from chatapp.ws.page_model import Append, Finish, Refresh, Replace, Send, Step, StreamState

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "stream"
FILES = sorted(VECTORS.glob("*.json"))


def page_of(page: dict[str, Any]) -> StreamState:
    return page_model.start(
        page["g"],
        seq=page.get("seq", 0),
        settled_end=page.get("settled_end", 0),
        tail=page.get("tail", ""),
        reasoning=page.get("reasoning", ""),
    )


def receive_frame(state: StreamState, parsed: object, at: float) -> Step:
    """A frame's messages for this answer, in order, as chat.js dispatches them by `g`."""
    effects: list[page_model.Effect] = []
    for message in page_model.messages_from_wire(parsed):
        if message.get("g") != state.g:
            continue
        result = page_model.receive(state, message, at)
        state = result.state
        effects.extend(result.effects)
    return Step(state, tuple(effects))


def run(state: StreamState, step: dict[str, Any]) -> Step:
    """One step as the page takes it, a refused join as chat.js carries it out (the settles after
    it left out)."""
    if "in" in step:
        result = receive_frame(state, step["in"], step["at"])
    elif "watch_check" in step:
        result = page_model.after_watch(state, step["watch_check"], step["at"])
    elif step.get("watch"):
        result = page_model.watch_sent(state, step["at"])
    else:
        raise ValueError(f"a step with no input: {step}")
    effects: list[page_model.Effect] = []
    refused = False
    current = result.state
    for effect in result.effects:
        if isinstance(effect, Append) and effect.settle is not None:
            if refused:
                effects.append(Append(effect.delta, None, None, redraft=True))
                continue
            if step.get("refuse_join") and effect.settle.join:
                refused = True
                effects.append(Append(effect.delta, None, None, redraft=True))
                refusal = page_model.refuse_settle(current, effect.settle, step["at"])
                current = refusal.state
                effects.extend(refusal.effects)
                continue
        effects.append(effect)
    assert refused == bool(step.get("refuse_join")), "the step has a joining settle to refuse"
    return Step(current, tuple(effects))


def _draft(effect: Append | Replace) -> object:
    """What an applied delta or snapshot does to the draft shown: "kept", None (it goes), or
    the draft that takes its place."""
    if isinstance(effect, Append) and not effect.redraft:
        return "kept"
    return asdict(effect.draft) if effect.draft is not None else None


def observed(result: Step) -> dict[str, Any]:
    effects, state = result.effects, result.state
    return {
        "sends": [e.message for e in effects if isinstance(e, Send)],
        "applied": [e.delta["seq"] for e in effects if isinstance(e, Append)],
        "settles": [asdict(e.settle) for e in effects if isinstance(e, Append) and e.settle],
        "drafts": [_draft(e) for e in effects if isinstance(e, Append | Replace)],
        "replaced": [e.snapshot["seq"] for e in effects if isinstance(e, Replace)],
        "finished": [e.done["status"] for e in effects if isinstance(e, Finish)],
        "refreshes": sum(isinstance(e, Refresh) for e in effects),
        "shown": {
            "seq": state.seq,
            "content": state.content,
            "offset": state.offset,
            "settled_end": state.settled_end,
            "tail": state.tail,
            "reasoning": state.reasoning,
            "held": sorted(state.held),
            "draft": list(state.draft) if state.draft is not None else None,
            "done": state.done,
        },
    }


def test_there_are_vectors() -> None:
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_vector(path: Path) -> None:
    vector = json.loads(path.read_text())
    state = page_of(vector["page"])
    for index, step in enumerate(vector["steps"]):
        result = run(state, step)
        state = result.state
        seen = observed(result)
        where = f"{path.name} step {index} (at {step['at']})"
        for key in ("sends", "applied", "settles", "drafts", "replaced", "finished", "refreshes"):
            if key in step:
                assert seen[key] == step[key], f"{where}: {key}"
        for key, value in step.get("shown", {}).items():
            assert key in seen["shown"], f"{where}: no such shown key {key}"
            assert seen["shown"][key] == value, f"{where}: shown {key}"


def test_a_step_leaves_the_state_given_as_it_was() -> None:
    before = page_model.start(1)
    after = page_model.receive(before, page_model.from_wire([1, 2, "b"]), 1000).state
    assert (before.seq, dict(before.held), before.asked_at) == (0, {}, None)
    assert (sorted(after.held), after.asked_at) == ([2], 1000)


def test_a_delta_off_the_wire() -> None:
    assert page_model.from_wire([3, 1, "a"]) == {"t": "delta", "g": 3, "seq": 1, "content": "a"}
    assert page_model.from_wire([3, 2, "", "why", {"settled": [0, 1, "<p>a</p>"]}]) == {
        "t": "delta",
        "g": 3,
        "seq": 2,
        "content": "",
        "reasoning": "why",
        "settled": [0, 1, "<p>a</p>"],
    }


def test_no_django() -> None:
    """The model is imported by code that runs no Django (the load benchmark's tabs)."""
    source = Path(page_model.__file__).read_text()
    assert "django" not in source.split('"""', 2)[2].lower()
