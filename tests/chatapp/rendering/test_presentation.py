"""The words under an answer: what went wrong, what it cost, and the meta line."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from chatapp.conversations.models import Message
from chatapp.conversations.presentation import (
    FinishNote,
    error_text,
    finish_note,
    format_cost,
    meta_items,
    warning_texts,
)
from chatapp.costs.models import Generation


def generation(content: str = "", reasoning: str = "", **fields: Any) -> Generation:
    """An unsaved generation and its message: these functions read fields, never the database."""
    message = Message(role="assistant", content=content, reasoning=reasoning)
    return Generation(message=message, model="emulator/chat", **fields)


REFUSED = {"status": "failed", "error_status": 402, "error_code": "402"}


# --- error_text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (
            {**REFUSED, "error_type": "insufficient_credits", "error_message": "No credits "},
            "The gateway refused the request (HTTP 402, insufficient_credits): No credits.",
        ),
        (
            {"status": "failed", "error_status": 429, "error_code": "rate_limited"},
            "The gateway refused the request (HTTP 429, rate_limited).",
        ),
        (
            {"status": "failed", "error_status": 400, "error_type": "invalid_request_error"},
            "The gateway refused the request (HTTP 400, invalid_request_error).",
        ),
    ],
)
def test_a_refused_request(fields: dict[str, Any], words: str) -> None:
    assert error_text(generation(**fields)) == words


def test_a_failure_midstream_keeps_the_partial_answer() -> None:
    failed = generation(
        "So far",
        status="failed",
        error_status=503,
        error_code="503",
        error_type="provider_unavailable",
        error_message="provider became unavailable",
    )
    assert error_text(failed) == (
        "The answer failed (HTTP 503, provider_unavailable): provider became unavailable."
        " The partial answer is kept."
    )


def test_reasoning_alone_counts_as_a_partial_answer() -> None:
    failed = generation(reasoning="Thinking…", status="failed", error_message="gone")
    assert error_text(failed) == "The answer failed: gone. The partial answer is kept."


def test_a_failure_without_text_or_status() -> None:
    timed_out = generation(
        status="failed",
        error_code="first_token_timeout",
        error_type="timeout",
        error_message="The gateway did not start answering in time (no first token within 5 s).",
    )
    assert error_text(timed_out) == (
        "The answer failed (first_token_timeout, timeout): "
        "The gateway did not start answering in time (no first token within 5 s)."
    )


def test_a_code_equal_to_the_type_is_named_once() -> None:
    failed = generation(status="failed", error_code="timeout", error_type="timeout")
    assert error_text(failed) == "The answer failed (timeout)."


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (
            "Half an ans",
            "The answer was cut off: the stream ended before the gateway said it was done"
            " (incomplete). The partial answer is kept.",
        ),
        (
            "",
            "The answer was cut off: the stream ended before the gateway said it was done"
            " (incomplete).",
        ),
    ],
)
def test_an_incomplete_answer(content: str, words: str) -> None:
    cut = generation(content, status="incomplete", error_type="incomplete", error_message="eof")
    assert error_text(cut) == words


def test_an_interrupted_answer_says_what_the_sweep_wrote() -> None:
    message = "The server stopped while this answer was being written; the text so far is kept."
    swept = generation("partial", status="interrupted", error_message=f"  {message} ")
    assert error_text(swept) == message
    assert error_text(generation(status="interrupted")) == (
        "The server stopped while writing this answer."
    )


@pytest.mark.parametrize(
    ("retry_after", "words"), [(2.5, " Retry after 2.5 s."), (30.0, " Retry after 30 s.")]
)
def test_retry_after_is_added(retry_after: float, words: str) -> None:
    limited = generation(
        status="failed",
        error_status=429,
        error_code="429",
        error_message="Slow down",
        retry_after=retry_after,
    )
    assert error_text(limited) == "The gateway refused the request (HTTP 429): Slow down." + words


@pytest.mark.parametrize("status", ["streaming", "completed", "cancelled"])
def test_answers_that_did_not_fail_have_no_error_text(status: str) -> None:
    assert error_text(generation("text", status=status, error_message="ignored")) == ""


def test_warnings_in_words() -> None:
    warned = generation(warnings=["unread_parts", "something_new"])
    assert warning_texts(warned) == [
        "The gateway sent parts this app could not read, so the answer shows empty.",
        "Warning from the stream reader: something_new.",
    ]
    assert warning_texts(generation()) == []


# --- finish_note --------------------------------------------------------------------------------

THOUGHT_ONLY = "The token budget ran out while the model was thinking, before it answered."
FILTERED = "A content filter (the gateway's or the model provider's)"


@pytest.mark.parametrize(
    ("fields", "note"),
    [
        (
            {"completion_tokens": 1234, "max_tokens": 2000},
            FinishNote("The answer was cut off at the token budget (1,234 tokens)."),
        ),
        (
            {"max_tokens": 4096},
            FinishNote("The answer was cut off at the token budget (4,096 tokens)."),
        ),
        ({}, FinishNote("The answer was cut off at the token budget.")),
    ],
)
def test_an_answer_cut_at_the_budget_says_so_and_how_large_it_was(
    fields: dict[str, Any], note: FinishNote
) -> None:
    cut = generation("Half an ans", "thought", status="completed", finish_reason="length", **fields)
    assert finish_note(cut) == note


@pytest.mark.parametrize(
    ("fields", "offered"),
    [
        ({"completion_tokens": 48}, True),  # the gateway's default budget: 4,096 is larger
        ({"max_tokens": 4096, "completion_tokens": 4096}, True),  # 8,192 next
        ({"max_tokens": 32_768, "completion_tokens": 32_768}, False),  # the most we ask for
        ({"completion_tokens": 40_000}, False),  # a gateway default beyond it
    ],
)
def test_a_budget_spent_on_thinking_offers_a_larger_one(
    fields: dict[str, Any], offered: bool
) -> None:
    thought = generation("", "Let me think", status="completed", finish_reason="length", **fields)
    assert finish_note(thought) == FinishNote(THOUGHT_ONLY, larger_budget=offered)


def test_whitespace_is_no_answer() -> None:
    thought = generation("\n ", "Let me think", status="completed", finish_reason="length")
    assert finish_note(thought) == FinishNote(THOUGHT_ONLY, larger_budget=True)


@pytest.mark.parametrize(
    ("content", "reasoning", "words"),
    [
        (
            "The first half",
            "",
            f"{FILTERED} stopped the answer here; what arrived before it is kept.",
        ),
        ("", "Thinking", f"{FILTERED} stopped the answer here; what arrived before it is kept."),
        ("", "", f"{FILTERED} withheld the answer, so there is nothing to show."),
    ],
)
def test_a_content_filter_is_explained(content: str, reasoning: str, words: str) -> None:
    filtered = generation(content, reasoning, status="completed", finish_reason="content_filter")
    assert finish_note(filtered) == FinishNote(words)


@pytest.mark.parametrize("finish_reason", ["stop", "tool_calls", "error", ""])
def test_other_endings_have_no_note(finish_reason: str) -> None:
    assert finish_note(generation("text", status="completed", finish_reason=finish_reason)) is None


def test_a_running_answer_has_no_note_yet() -> None:
    assert finish_note(generation("", "thinking", finish_reason="length")) is None


# --- format_cost --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (
            {
                **REFUSED,
                "cost_source": "not_billed",
                "cost_note": "refused before the answer began",
            },
            "not billed (refused before the answer began)",
        ),
        (
            {
                **REFUSED,
                "cost_source": "unavailable",
                "upstream_id": "gen-1",
                "cost_note": "Numes reported no cost for this answer and no price is configured",
            },
            "cost unavailable: Numes reported no cost for this answer and no price is configured",
        ),
        ({**REFUSED, "cost_source": "pending"}, "cost pending"),
        ({"cost_source": "pending"}, "cost pending"),
        ({"cost_source": "unavailable"}, "cost unavailable"),
        ({"cost_source": "stream"}, "cost unknown"),
        (
            {"cost": Decimal("0.000008600000"), "cost_unit": "credits", "cost_source": "stream"},
            "0.0000086 credits",
        ),
        (
            {"cost": Decimal("0.000008600000"), "cost_unit": "credits", "cost_source": "record"},
            "0.0000086 credits",
        ),
        (
            {"cost": Decimal("0.000008600000"), "cost_unit": "credits", "cost_source": "estimate"},
            "≈0.0000086 credits (estimate)",
        ),
        (
            {"cost": Decimal("10.000000000000"), "cost_unit": "credits", "cost_source": "stream"},
            "10 credits",
        ),
        ({"cost": Decimal("0E-12"), "cost_unit": "credits", "cost_source": "record"}, "0 credits"),
        (
            {"cost": Decimal("12.500000000000"), "cost_unit": "micro_usd", "cost_source": "stream"},
            "$0.0000125",
        ),
        ({"cost": Decimal("3"), "cost_unit": "", "cost_source": "stream"}, "3 credits"),
        ({"cost": Decimal("130"), "cost_unit": "micro_usd", "cost_source": "stream"}, "$0.000130"),
        ({"cost": Decimal("0.5"), "cost_unit": "usd", "cost_source": "stream"}, "$0.50"),
        ({"cost": Decimal("120"), "cost_unit": "sat", "cost_source": "record"}, "120 sat"),
        (
            {"cost": Decimal("0.0000081"), "cost_unit": "pnp", "cost_source": "stream"},
            "0.0000081 PnP",
        ),
    ],
)
def test_format_cost(fields: dict[str, Any], words: str) -> None:
    assert format_cost(generation(**fields)) == words


# --- meta_items ---------------------------------------------------------------------------------


def test_meta_items_of_a_full_record() -> None:
    done = generation(
        status="completed",
        served_model="numes/otter-1",
        prompt_tokens=11,
        completion_tokens=42,
        reasoning_tokens=7,
        cached_tokens=5,
        cost=Decimal("0.000215000000"),
        cost_unit="credits",
        cost_source="stream",
        ttft_ms=120,
        finish_reason="tool_calls",
    )
    assert meta_items(done) == [
        "numes/otter-1",
        "11 in · 42 out (7 reasoning) · 5 cached tokens",
        "0.000215 credits",
        "first token 120 ms",
        "finish: tool_calls",
    ]


# "length" and "content_filter" have a note of their own (`finish_note`), not a code here.
@pytest.mark.parametrize("finish_reason", ["stop", "error", "", "length", "content_filter"])
def test_meta_items_leave_out_what_is_not_known_or_not_news(finish_reason: str) -> None:
    done = generation(status="completed", cost_source="pending", finish_reason=finish_reason)
    assert meta_items(done) == ["emulator/chat", "cost pending"]


def test_meta_items_count_a_missing_side_as_zero() -> None:
    assert meta_items(generation(completion_tokens=3, cost_source="unavailable")) == [
        "emulator/chat",
        "0 in · 3 out tokens",
        "cost unavailable",
    ]
