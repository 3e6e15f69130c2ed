"""Read aloud spends only once: 30 requests at once for one answer's reading made 30 speech
generations, and hanging up and asking again billed again.

Now the requests of one process join the one read aloud (each plays all of its audio), a read aloud
under way in another process is refused in words (the answer's row is locked while a read aloud is
claimed, so two processes cannot both start one), a stopped read aloud is not started again for a
few seconds, and read alouds count in the per-user answer limit. Over Django's real ASGI handler and
the real emulator, whose records say what was asked upstream.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from chatapp.conversations.models import Message
from chatapp.costs.models import Generation
from chatapp.read_aloud import records as read_aloud_records
from chatapp.read_aloud import stream
from gateway_client.emulator import EmulatorURL
from gateway_client.emulator.media import wav_bytes
from tests.chatapp.conftest import UpstreamLog
from tests.chatapp.read_aloud.test_read_aloud import (
    ANSWER,
    PACED,
    SLOW,
    AsgiRequest,
    an_answer,
    read_aloud_of,
    read_aloud_url,
    session_headers,
)
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("closed_clients")]

COOLING = "Reading this answer aloud was stopped a moment ago; it can be read aloud again in "


@pytest.fixture(autouse=True)
def emulator_gateway(settings: Any, emulator_url: EmulatorURL) -> None:
    """The emulator's Numes, which speaks, as the default gateway (the scripted one does not)."""
    settings.LLM_BASE_URL = f"{emulator_url}/numes/api/v1"
    settings.LLM_API_KEY = "test-key"


@pytest.fixture
def upstream(emulator_url: EmulatorURL) -> UpstreamLog:
    return UpstreamLog(emulator_url)


async def test_thirty_requests_at_once_make_one_read_aloud(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, PACED)
    headers = await session_headers(alice)
    requests = [AsgiRequest(read_aloud_url(answer), headers).start() for _ in range(30)]
    await asyncio.gather(*(request.finish(within=30) for request in requests))

    assert [request.status for request in requests] == [200] * 30
    assert {request.body for request in requests} == {wav_bytes(ANSWER)}, "each heard all of it"
    assert len(upstream.new(endpoint="audio/speech")) == 1, "one request upstream"
    read_aloud = await read_aloud_of(answer, status="completed")
    assert await Generation.objects.filter(read_aloud=answer).acount() == 1, "one in the ledger"
    assert read_aloud.cost is not None


def _claim_at_once(user: Any, answer_pk: int, threads: int) -> list[object]:
    """`create_read_aloud` for the same answer from `threads` threads at once, each with its own
    database connection, as server processes have: what each returned or raised."""
    barrier = threading.Barrier(threads)

    def claim() -> object:
        try:
            barrier.wait()
            return read_aloud_records.create_read_aloud(user, answer_pk)
        except read_aloud_records.ReadAloudRefused as exc:
            return exc
        finally:
            connection.close()

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda _: claim(), range(threads)))


async def test_two_processes_cannot_both_start_a_read_aloud(alice: Any) -> None:
    answer = await an_answer(alice, PACED)
    outcomes = await sync_to_async(_claim_at_once, thread_sensitive=False)(alice, answer.pk, 8)
    started = [o for o in outcomes if isinstance(o, read_aloud_records.ReadAloudStart)]
    refused = [o for o in outcomes if isinstance(o, read_aloud_records.ReadAloudInFlight)]
    assert len(started) == 1
    assert len(refused) == 7
    assert {str(exc) for exc in refused} == {read_aloud_records.IN_FLIGHT}
    assert await Generation.objects.filter(read_aloud=answer).acount() == 1


async def test_a_read_aloud_under_way_in_another_process_is_refused_in_words(
    alice: Any, upstream: UpstreamLog, settings: Any
) -> None:
    answer = await an_answer(alice, PACED)
    message = await Message.objects.select_related("conversation").aget(pk=answer.pk)
    elsewhere = await Generation.objects.acreate(
        kind=Generation.Kind.READ_ALOUD,
        read_aloud=message,
        conversation=message.conversation,
        model="emulator/audio",
        heartbeat_at=timezone.now(),
    )
    headers = await session_headers(alice)
    request = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert request.status == 409
    assert request.body.decode() == read_aloud_records.IN_FLIGHT
    assert not upstream.new(endpoint="audio/speech")

    # Once that process is gone (its heartbeat stale), a read aloud starts.
    stale = timezone.now() - timedelta(seconds=settings.CHAT_STALE_AFTER + 1)
    await Generation.objects.filter(pk=elsewhere.pk).aupdate(heartbeat_at=stale)
    request = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert request.status == 200
    assert len(upstream.new(endpoint="audio/speech")) == 1


async def test_hanging_up_and_asking_again_does_not_bill_twice(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, SLOW)
    headers = await session_headers(alice)
    first = AsgiRequest(read_aloud_url(answer), headers).start()
    await asyncio.wait_for(first.first_chunk.wait(), 10)
    first.disconnect()
    await first.finish()
    for _ in range(3):  # at once, and again once the stop is on record
        again = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
        assert again.status == 409
        assert again.body.decode().startswith(COOLING)
        await read_aloud_of(answer, status="cancelled")
    assert len(upstream.new(endpoint="audio/speech")) == 1
    assert await Generation.objects.filter(read_aloud=answer).acount() == 1

    # After the cool-down it may be read again.
    earlier = timezone.now() - read_aloud_records.COOL_DOWN - timedelta(seconds=1)
    await Generation.objects.filter(read_aloud=answer).aupdate(finished_at=earlier)
    later = AsgiRequest(read_aloud_url(answer), headers).start()
    await asyncio.wait_for(later.first_chunk.wait(), 10)
    assert later.status == 200
    later.disconnect()
    await later.finish()
    assert len(upstream.new(endpoint="audio/speech")) == 2


async def test_read_alouds_count_in_the_answer_limit(
    alice: Any, upstream: UpstreamLog, settings: Any
) -> None:
    answer = await an_answer(alice, PACED)  # its own generation was started just now
    settings.CHAT_GENERATIONS_PER_MINUTE = 2
    headers = await session_headers(alice)
    first = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert first.status == 200
    await read_aloud_of(answer, status="completed")
    # Its audience leaves as the last byte is sent; until the read aloud has ended here too, a new
    # request would join it (and be told it was stopped), not start one the limit counts.
    await eventually(lambda: not stream.running_pks(), what="the reading to end")
    await Generation.objects.filter(read_aloud=answer).aupdate(status="incomplete")  # not reused
    second = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert second.status == 429
    assert second.body.decode().startswith("You have started 2 answers in the last minute")
    assert second.headers["retry-after"].isdigit()
    assert len(upstream.new(endpoint="audio/speech")) == 1


async def test_the_page_is_told_in_words_why_a_read_aloud_is_refused(
    alice: Any, upstream: UpstreamLog
) -> None:
    """The page's `<audio>` cannot read a refused response's body: the state view says it."""
    answer = await an_answer(alice, SLOW)
    headers = await session_headers(alice)
    state_url = reverse("chat:read_aloud_state", args=[answer.pk])
    client = AsyncClient()
    await client.aforce_login(alice)
    first = AsgiRequest(read_aloud_url(answer), headers).start()
    await asyncio.wait_for(first.first_chunk.wait(), 10)
    assert (await client.get(state_url)).json()["refused"] == read_aloud_records.IN_FLIGHT
    first.disconnect()
    await first.finish()
    await read_aloud_of(answer, status="cancelled")
    state = (await client.get(state_url)).json()
    assert state["status"] == "cancelled"
    assert state["refused"].startswith(COOLING)

    earlier = timezone.now() - read_aloud_records.COOL_DOWN - timedelta(seconds=1)
    await Generation.objects.filter(read_aloud=answer).aupdate(finished_at=earlier)
    assert (await client.get(state_url)).json()["refused"] == ""
