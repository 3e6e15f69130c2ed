"""Answers started per user per minute (`CHAT_GENERATIONS_PER_MINUTE`): send, retry, edit and
continue all count and are all refused past the limit, with the composer's error in words; other
users are unaffected, and a minute later the user may start answers again."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from chatapp.access import rate_limits
from chatapp.conversations.models import Message
from chatapp.costs.models import Generation
from chatapp.streaming import worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("closed_clients")]

HTMX = {"HX-Request": "true"}
LIMIT = 3


async def signed_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


def refusal(html: str) -> str | None:
    match = re.search(r"You have started \d+ answers in the last minute[^<]*", html)
    return match[0] if match else None


async def test_every_way_of_starting_an_answer_is_limited(
    alice: Any, bob: Any, settings: Any
) -> None:
    settings.CHAT_GENERATIONS_PER_MINUTE = LIMIT
    client = await signed_in(alice)
    response = await client.post(reverse("chat:send_new"), {"content": "one", "model": "ok"})
    conversation = int(response["Location"].split("/")[2])
    for text in ("two", "three"):
        await workers_finished()
        url = reverse("chat:send", args=[conversation])
        response = await client.post(url, {"content": text, "model": "ok"}, headers=HTMX)
        assert refusal(response.content.decode()) is None
    await workers_finished()
    question = await Message.objects.filter(role="user").alatest("created_at")
    answer = await Message.objects.filter(role="assistant").alatest("created_at")
    await Generation.objects.filter(message=answer).aupdate(finish_reason="length")
    attempts = {
        "send": (reverse("chat:send", args=[conversation]), {"content": "four", "model": "ok"}),
        "send_new": (reverse("chat:send_new"), {"content": "four", "model": "ok"}),
        "retry": (reverse("chat:retry", args=[answer.pk]), {"model": "ok"}),
        "edit": (reverse("chat:edit", args=[question.pk]), {"content": "3!", "model": "ok"}),
        "continue": (reverse("chat:continue", args=[answer.pk]), {}),
    }
    for name, (url, data) in attempts.items():
        response = await client.post(url, data, headers=HTMX)
        assert response.status_code == 200, name
        assert response["HX-Retarget"] == "#composer-error", name
        text = refusal(response.content.decode())
        assert text is not None, name
        assert text.startswith(f"You have started {LIMIT} answers in the last minute"), name
        assert re.search(r"try again in \d+ s\.$", text), text
    assert await Generation.objects.acount() == LIMIT  # none of them started one
    # Another user is not held back by alice's answers.
    response = await (await signed_in(bob)).post(
        reverse("chat:send_new"), {"content": "mine", "model": "ok"}
    )
    assert response.status_code == 302
    await workers_finished()
    # A minute on, each way works again (retry shown; the others pass the same check).
    await Generation.objects.aupdate(started_at=timezone.now() - timedelta(seconds=61))
    url, data = attempts["retry"]
    response = await client.post(url, data, headers=HTMX)
    assert refusal(response.content.decode()) is None
    assert "HX-Retarget" not in response
    await workers_finished()


async def test_sends_at_once_past_the_limit_reach_the_gateway_no_more_than_the_limit(
    alice: Any, settings: Any
) -> None:
    """A new chat's request leaves before its rows are written: 45 sent at once by one user, with
    30 allowed a minute, must ask the gateway 30 times, each on record, and refuse 15 in words
    before anything leaves (a request that left is a paid prompt)."""
    from tests.security.scripted_gateway import CHAT_MODELS_ASKED

    settings.CHAT_GENERATIONS_PER_MINUTE = 30
    client = await signed_in(alice)
    asked_before = len(CHAT_MODELS_ASKED)
    responses = await asyncio.gather(
        *(
            client.post(
                reverse("chat:send_new"), {"content": f"question {n}", "model": "ok"}, headers=HTMX
            )
            for n in range(45)
        )
    )
    await workers_finished()
    refused = [r for r in responses if refusal(r.content.decode()) is not None]
    assert len(refused) == 15
    assert await Generation.objects.filter(user=alice).acount() == 30
    assert len(CHAT_MODELS_ASKED) - asked_before == 30


async def test_a_burst_of_admissions_says_the_real_wait(alice: Any, settings: Any) -> None:
    """#45: sends admitted at once (their requests left, their rows not yet written) fill the
    minute: the refusal says about a minute, not "try again in 1 s"."""
    settings.CHAT_GENERATIONS_PER_MINUTE = LIMIT
    held = [await sync_to_async(rate_limits.admit)(alice) for _ in range(LIMIT)]
    try:
        with pytest.raises(rate_limits.RateLimited) as refused:
            await sync_to_async(rate_limits.check_generation_start)(alice)
        assert refused.value.retry_after >= 59
        assert str(refused.value).endswith(f"try again in {refused.value.retry_after} s.")
        # One on record since: its row's start counts, the others' admissions still do.
        generation = await Generation.objects.acreate(user=alice, model="ok")
        held[0].record(generation.pk)
        with pytest.raises(rate_limits.RateLimited) as again:
            await sync_to_async(rate_limits.check_generation_start)(alice)
        assert again.value.retry_after >= 59
    finally:
        for admission in held:
            admission.release()
