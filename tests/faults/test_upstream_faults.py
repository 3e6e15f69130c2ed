"""Upstream faults between the app and the gateway, through the fault proxy.

For each: what the user is finally shown (the status and error of the answer's final render),
one terminal state written once, no traceback in the log, and every text the page showed a
prefix of the stored one (here, with no layer in between to lose a delta, equal to it at the end).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from chatapp.costs.models import Generation
from gateway_client.emulator import EmulatorURL

from .fault_proxy import (
    Answer,
    Blackhole,
    Corrupt,
    DripFrom,
    Fault,
    Forward,
    ResetAt,
    StallAt,
    TruncateAt,
    http_reply,
)
from .inprocess import FinalWrites, Run, assert_ended_once_and_shown_a_prefix, run_answer, target

pytestmark = [pytest.mark.django_db(transaction=True)]

Status = Generation.Status
SEEDS = range(30)
# Bytes of the emulator's `emulator/chat` reply through the proxy, head included, at least (the
# clean run checks it), so that every random offset falls inside the reply.
REPLY_BYTES = 1500


def first(fault: Fault) -> Callable[[int], Fault]:
    """`fault` on the answer's connection; later ones (the cost lookup, a retry) pass."""
    return lambda n: fault if n == 0 else Forward()


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> FinalWrites:
    return FinalWrites(monkeypatch)


@pytest.fixture
def answer(alice: Any, settings: Any, fault_emulator: EmulatorURL, writes: FinalWrites) -> Any:
    upstream = target(fault_emulator)

    async def run(plan: Any, **options: Any) -> Run:
        result = await run_answer(alice, settings, upstream, plan, writes, **options)
        assert_ended_once_and_shown_a_prefix(result)
        shown = f"{len(result.page.content)}/{len(result.stored)} chars"
        print(f"{result.generation.status}: {result.error_shown!r} (shown {shown})")
        return result

    return run


async def test_a_clean_proxy_changes_nothing(answer: Any) -> None:
    run = await answer(Forward())
    assert run.generation.status == Status.COMPLETED
    assert run.error_shown == ""
    assert len(run.stored) > 100
    assert run.proxy.connections[0].forwarded >= REPLY_BYTES


@pytest.mark.parametrize("seed", SEEDS)
async def test_a_reset_at_any_byte_offset_ends_clearly(answer: Any, seed: int) -> None:
    offset = random.Random(seed).randrange(REPLY_BYTES)
    run = await answer(first(ResetAt(offset)))
    status = run.generation.status
    if status == Status.FAILED:  # reset before the stream began
        assert run.stored == ""
        assert "The answer failed" in run.error_shown
        assert "closed the connection before answering" in run.error_shown
    else:  # the head had arrived: the stream began, and what came of it is kept
        assert status == Status.INCOMPLETE, (offset, run.generation.error_message)
        assert run.error_shown.startswith("The answer was cut off")


async def test_a_truncated_stream_is_incomplete_with_the_text_kept(answer: Any) -> None:
    run = await answer(first(TruncateAt(900)))
    assert run.generation.status == Status.INCOMPLETE
    assert run.stored
    assert run.error_shown.startswith("The answer was cut off")
    assert run.error_shown.endswith("The partial answer is kept.")


async def test_a_stall_mid_stream_hits_the_idle_deadline(answer: Any) -> None:
    run = await answer(first(StallAt(900)))
    assert run.generation.status == Status.FAILED
    assert run.stored
    assert "The answer stalled: the gateway went quiet" in run.error_shown
    assert "idle deadline" in run.error_shown


async def test_a_drip_of_a_byte_every_0_4_s_hits_the_idle_deadline(answer: Any) -> None:
    """A byte every 0.4 s keeps the socket busy but completes no event: progress, not bytes,
    is what the deadline watches."""
    run = await answer(first(DripFrom(900, interval=0.4)))
    assert run.generation.status == Status.FAILED
    assert run.stored
    assert "The answer stalled" in run.error_shown
    assert run.proxy.connections[0].forwarded > 900  # it was dripping, not stalled


async def test_a_drip_from_the_first_byte_hits_the_first_token_deadline(
    answer: Any, settings: Any
) -> None:
    settings.LLM_TIMEOUTS = {**settings.LLM_TIMEOUTS, "first_token": 1.0}
    run = await answer(first(DripFrom(0, interval=0.4)))
    assert run.generation.status == Status.FAILED
    assert run.stored == ""
    assert "did not start answering in time" in run.error_shown


async def test_a_slow_answer_hits_the_total_deadline(answer: Any, settings: Any) -> None:
    settings.LLM_TIMEOUTS = {**settings.LLM_TIMEOUTS, "total": 1.0}
    run = await answer(Forward(), model="emulator/long?tokens_per_second=60")
    assert run.generation.status == Status.FAILED
    assert run.stored
    assert "The answer took longer than the time allowed" in run.error_shown


async def test_corrupted_bytes_mid_json_fail_the_answer_clearly(answer: Any) -> None:
    run = await answer(first(Corrupt(b'"content":"', b'"}]}\x00\xff', nth=4)))
    assert run.generation.status == Status.FAILED
    assert run.generation.error_type == "protocol_error"
    assert run.stored, "what arrived before the broken event is kept"
    assert run.error_shown.startswith("The answer failed (protocol_error): malformed event")
    assert run.error_shown.endswith("The partial answer is kept.")


async def test_a_200_html_page_is_refused_not_shown(answer: Any) -> None:
    page = b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"
    run = await answer(Answer(http_reply("200 OK", "text/html; charset=utf-8", page)))
    assert run.generation.status == Status.FAILED
    assert run.stored == ""
    assert run.error_shown.startswith("The gateway refused the request")
    assert "nginx" not in run.stored
    assert len(run.proxy.connections) == 1  # not retried


def error_503(retry_after: str | None = None, extra: str = "") -> Answer:
    if retry_after is not None:
        extra += f"Retry-After: {retry_after}\r\n"
    body = b'{"error": {"code": 503, "message": "upstream overloaded"}}'
    return Answer(http_reply("503 Service Unavailable", "application/json", body, extra))


async def test_one_503_is_retried_once_and_the_answer_completes(answer: Any) -> None:
    run = await answer(lambda n: error_503("0") if n == 0 else Forward())
    assert run.generation.status == Status.COMPLETED
    assert run.error_shown == ""
    assert run.stored


async def test_a_burst_of_503s_fails_after_one_retry(answer: Any) -> None:
    run = await answer(lambda n: error_503("0") if n < 5 else Forward())
    assert run.generation.status == Status.FAILED
    assert run.generation.error_status == 503
    assert "The gateway refused the request (HTTP 503)" in run.error_shown
    assert "upstream overloaded" in run.error_shown
    assert len(run.proxy.connections) == 2  # the request and its one retry


async def test_a_503_after_the_gateways_own_retries_is_shown_at_once(answer: Any) -> None:
    """LiteLLM retries a failing model itself, then says so: sent again, one message would cost
    its upstream twice its retries (issue 23: six calls, the error after 11.6 s)."""
    retried = "x-litellm-attempted-retries: 2\r\nx-litellm-max-retries: 2\r\n"
    run = await answer(lambda n: error_503(extra=retried) if n == 0 else Forward())
    assert run.generation.status == Status.FAILED
    assert "The gateway refused the request (HTTP 503)" in run.error_shown
    assert len(run.proxy.connections) == 1


async def test_a_retry_after_past_the_budget_is_shown_not_waited(
    answer: Any, settings: Any
) -> None:
    settings.LLM_TIMEOUTS = {**settings.LLM_TIMEOUTS, "first_token": 120.0, "total": None}
    run = await answer(lambda n: error_503("60") if n == 0 else Forward())
    assert run.generation.status == Status.FAILED
    assert run.generation.retry_after == 60
    assert "Retry after 60 s." in run.error_shown
    assert len(run.proxy.connections) == 1


async def test_a_502_is_not_retried(answer: Any) -> None:
    body = b"<html>502 Bad Gateway</html>"
    run = await answer(Answer(http_reply("502 Bad Gateway", "text/html", body)))
    assert run.generation.status == Status.FAILED
    assert run.generation.error_status == 502
    assert run.error_shown.startswith("The gateway refused the request (HTTP 502")
    assert len(run.proxy.connections) == 1


async def test_a_gateway_that_accepts_and_never_answers_times_out(
    answer: Any, settings: Any
) -> None:
    settings.LLM_TIMEOUTS = {**settings.LLM_TIMEOUTS, "first_token": 1.0}
    run = await answer(Blackhole())
    assert run.generation.status == Status.FAILED
    assert run.stored == ""
    assert "did not start answering in time" in run.error_shown
