"""Read aloud over Django's real ASGI handler (the one Daphne runs) and the real emulator.

The requests are driven message by message (`AsgiRequest`), as a server does: each body chunk is
seen when the app sends it, and `disconnect()` delivers the `http.disconnect` a closed browser
connection becomes, which Django's handler turns into the cancellation the read aloud must survive.
(Django's test client would buffer the whole body, and cannot disconnect.)
"""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import CostUnit, Money
from chatapp.read_aloud.models import ReadAloudAudio
from chatapp.streaming import sweep
from gateway_client.emulator.media import wav_bytes
from tests.chatapp.conftest import UpstreamLog
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]

ANSWER = "Otters hold hands while they sleep so that they do not drift apart."
SLOW = "emulator/audio?tokens_per_second=4"  # a chunk a second: 8 s of body
PACED = "emulator/audio?tokens_per_second=40"  # a chunk every 0.1 s


class AsgiRequest:
    """One GET to the app over ASGI, as a server makes it."""

    def __init__(self, path: str, headers: dict[str, str]) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[tuple[float, bytes]] = []  # (time.time(), bytes) as each was sent
        self.started = asyncio.Event()
        self.first_chunk = asyncio.Event()
        self.ended = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _receive(self) -> dict[str, Any]:
        return await self._inbox.get()

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
            self.started.set()
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.chunks.append((time.time(), message["body"]))
                self.first_chunk.set()
            if not message.get("more_body"):
                self.ended.set()

    def start(self) -> AsgiRequest:
        app = get_asgi_application()
        self.task = asyncio.get_running_loop().create_task(
            app(self.scope, self._receive, self._send)
        )
        return self

    def disconnect(self) -> float:
        self._inbox.put_nowait({"type": "http.disconnect"})
        return time.time()

    async def finish(self, within: float = 15.0) -> AsgiRequest:
        assert self.task is not None
        await asyncio.wait_for(self.task, within)
        return self

    @property
    def body(self) -> bytes:
        return b"".join(piece for _, piece in self.chunks)


async def session_headers(user: Any, *, site: str | None = "same-origin") -> dict[str, str]:
    client = AsyncClient()
    await client.aforce_login(user)
    headers = {"host": "testserver", "cookie": f"sessionid={client.cookies['sessionid'].value}"}
    if site is not None:
        headers["sec-fetch-site"] = site
    return headers


def _answer(user: Any, text: str, gateway_row: Gateway) -> Message:
    conversation = Conversation.objects.create(user=user, gateway=gateway_row)
    question = Message.objects.create(conversation=conversation, role="user", content="Otters?")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", parent=question, content=text
    )
    Generation.objects.create(
        message=answer,
        conversation=conversation,
        gateway=gateway_row,
        model="emulator/chat",
        dialect="numes",
        status=Generation.Status.COMPLETED,
    )
    return answer


async def an_answer(user: Any, speech_model: str, text: str = ANSWER) -> Message:
    """A finished answer of `user`'s through the default gateway (the emulator's Numes), whose
    speech model is `speech_model` ("": none)."""

    def make() -> Message:
        _, default_pk = configs.configs(force=True)
        Gateway.objects.filter(pk=default_pk).update(speech_model=speech_model)
        configs.forget_configs()
        return _answer(user, text, Gateway.objects.get(pk=default_pk))

    return await sync_to_async(make)()


def read_aloud_url(answer: Message) -> str:
    return reverse("chat:read_aloud", args=[answer.pk])


async def read_aloud_of(answer: Message, *, status: str | None = None) -> Generation:
    """The answer's one read aloud, once it has reached `status` (any, if None) and its cost is no
    longer pending."""

    async def found() -> Generation | None:
        row = await Generation.objects.filter(read_aloud=answer).afirst()
        if row is None or row.cost_source == Generation.CostSource.PENDING:
            return None
        return row if status is None or row.status == status else None

    return await eventually(found, what=f"the reading of {answer.pk} to settle", within=20)


async def stored_audio(generation: Generation) -> bytes:
    return bytes((await ReadAloudAudio.objects.aget(generation=generation)).data)


async def test_audio_streams_before_it_has_all_arrived_and_completes_on_the_record(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, PACED)
    request = AsgiRequest(read_aloud_url(answer), await session_headers(alice)).start()
    await asyncio.wait_for(request.first_chunk.wait(), 10)
    record = await upstream.one(endpoint="audio/speech")
    assert record.finished_at is None, "the first bytes reached the browser mid-stream"
    assert request.status == 200
    assert request.headers["content-type"] == "audio/wav"
    assert request.headers["cache-control"] == "no-store"
    await request.finish()
    assert request.body == wav_bytes(ANSWER), "every byte the gateway sent, in order"
    assert len(request.chunks) > 1

    read_aloud = await read_aloud_of(answer, status="completed")
    settled = await upstream.settled(record.id)
    assert settled.final_outcome == "completed"
    assert read_aloud.kind == "speech"
    assert read_aloud.message_id is None
    assert read_aloud.upstream_id == record.id
    assert read_aloud.cost_source == "record"
    assert read_aloud.cost == Decimal(str(settled.total_cost))
    assert read_aloud.cost > 0
    assert await stored_audio(read_aloud) == request.body


async def test_playing_again_serves_the_stored_audio_and_costs_nothing(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, PACED)
    headers = await session_headers(alice)
    first = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    await read_aloud_of(answer, status="completed")
    again = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert again.status == 200
    assert again.body == first.body
    assert again.headers["content-type"] == "audio/wav"
    assert len(upstream.new(endpoint="audio/speech")) == 1, "no second request upstream"
    assert await Generation.objects.filter(read_aloud=answer).acount() == 1


async def test_the_stored_audio_is_served_in_the_byte_range_asked_for(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, PACED)
    headers = await session_headers(alice)
    whole = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert "accept-ranges" not in whole.headers, "a streamed read aloud cannot be sought in"
    await read_aloud_of(answer, status="completed")
    size = len(whole.body)

    again = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert again.status == 200
    assert again.headers["accept-ranges"] == "bytes"
    part = (
        await AsgiRequest(read_aloud_url(answer), {**headers, "range": "bytes=100-"})
        .start()
        .finish()
    )
    assert part.status == 206
    assert part.headers["content-range"] == f"bytes 100-{size - 1}/{size}"
    assert part.body == whole.body[100:]
    tail_headers = {**headers, "range": "bytes=-300", "accept-encoding": "gzip"}
    tail = await AsgiRequest(read_aloud_url(answer), tail_headers).start().finish()
    assert (tail.status, tail.body) == (206, whole.body[-300:]), "a range is never compressed"
    assert "content-encoding" not in tail.headers
    past = AsgiRequest(read_aloud_url(answer), {**headers, "range": f"bytes={size}-"}).start()
    await past.finish()
    assert past.status == 416
    assert past.headers["content-range"] == f"bytes */{size}"
    assert len(upstream.new(endpoint="audio/speech")) == 1, "every range from the stored audio"


async def test_a_disconnect_closes_the_upstream_and_keeps_the_audio_so_far(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, SLOW)
    request = AsgiRequest(read_aloud_url(answer), await session_headers(alice)).start()
    await asyncio.wait_for(request.first_chunk.wait(), 10)
    left_at = request.disconnect()
    await request.finish()

    record = await upstream.finished(await upstream.one(endpoint="audio/speech"))
    assert record.final_outcome == "cancelled", "the gateway's request was cancelled"
    assert record.cancelled_at is not None
    assert left_at <= record.cancelled_at, "cancelled by the disconnect"
    read_aloud = await read_aloud_of(answer, status="cancelled")
    kept = await stored_audio(read_aloud)
    assert len(kept) == record.bytes_delivered < len(wav_bytes(ANSWER))
    assert kept.startswith(request.body)
    settled = await upstream.settled(record.id)
    assert read_aloud.cost_source == "record"
    assert read_aloud.cost == Decimal(str(settled.total_cost))
    assert read_aloud.cost > 0


async def test_the_sweep_leaves_a_read_aloud_running_in_this_process_alone(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, SLOW)
    request = AsgiRequest(read_aloud_url(answer), await session_headers(alice)).start()
    await asyncio.wait_for(request.first_chunk.wait(), 10)
    # Its heartbeat counts as stale at once: only its running here (`sweep.also_running`, told by
    # `read_aloud.stream`) keeps it from being interrupted.
    assert await sweep.sweep_stale_generations(stale_after=0) == 0
    running = await Generation.objects.aget(read_aloud=answer)
    assert running.status == "streaming"
    request.disconnect()
    await request.finish()
    await read_aloud_of(answer, status="cancelled")


async def test_audio_that_ends_early_is_incomplete_and_not_reused(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, "emulator/error-midstream")
    headers = await session_headers(alice)
    request = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert request.status == 200
    assert 0 < len(request.body) < len(wav_bytes(ANSWER)), "the body ended early"

    read_aloud = await read_aloud_of(answer, status="incomplete")
    assert "The audio broke off after" in read_aloud.error_message
    assert await stored_audio(read_aloud) == request.body
    record = await upstream.settled(read_aloud.upstream_id)
    assert record.final_outcome == "error"
    assert read_aloud.cost_source == "record"
    assert read_aloud.cost == Decimal(str(record.total_cost))

    client = AsyncClient()
    await client.aforce_login(alice)
    state = await client.get(reverse("chat:read_aloud_state", args=[answer.pk]))
    assert state.json()["status"] == "incomplete"
    assert "broke off" in state.json()["error"]

    await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert len(upstream.new(endpoint="audio/speech")) == 2, "an incomplete reading is not reused"


async def test_a_refusal_before_audio_fails_unbilled_with_the_reason(
    alice: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, "emulator/error-before")
    request = (
        await AsgiRequest(read_aloud_url(answer), await session_headers(alice)).start().finish()
    )
    assert request.status == 502
    assert request.body.decode().startswith("The gateway refused to read it aloud: ")
    read_aloud = await read_aloud_of(answer, status="failed")
    assert read_aloud.error_status == 402
    assert read_aloud.cost_source == "not_billed"
    assert not await ReadAloudAudio.objects.filter(generation=read_aloud).aexists()


@pytest.mark.parametrize("site", ["cross-site", "same-site", None])
async def test_a_request_not_from_this_site_is_refused(
    alice: Any, upstream: UpstreamLog, site: str | None
) -> None:
    answer = await an_answer(alice, PACED)
    headers = await session_headers(alice, site=site)
    request = await AsgiRequest(read_aloud_url(answer), headers).start().finish()
    assert request.status == 403
    assert request.body.decode() == "Read aloud plays only on this site's own pages."
    assert not upstream.new(endpoint="audio/speech")
    assert not await Generation.objects.filter(read_aloud=answer).aexists()


async def test_another_users_answer_is_not_found(
    alice: Any, bob: Any, upstream: UpstreamLog
) -> None:
    answer = await an_answer(alice, PACED)
    request = await AsgiRequest(read_aloud_url(answer), await session_headers(bob)).start().finish()
    assert request.status == 404
    assert not upstream.new(endpoint="audio/speech")


async def fragment(user: Any, answer: Message) -> str:
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(reverse("chat:message", args=[answer.pk]))
    return response.content.decode()


async def test_the_button_is_offered_only_where_a_gateway_speaks(alice: Any, settings: Any) -> None:
    settings.CHAT_KEY_ENV_ALLOWED = ("HOME",)  # a variable always set, as the Osmexo row's key
    spoken = await an_answer(alice, "emulator/audio")
    assert ">Read aloud</button>" in await fragment(alice, spoken)
    assert f'data-read-aloud-url="{read_aloud_url(spoken)}"' in await fragment(alice, spoken)

    silent = await an_answer(alice, "")
    assert "Read aloud" not in await fragment(alice, silent)

    def osmexo_answer() -> Message:
        _, default_pk = configs.configs(force=True)
        Gateway.objects.filter(pk=default_pk).update(speech_model="emulator/audio")
        osmexo = Gateway.objects.create(
            name="Osmexo", base_url="https://osmexo.example/v1", dialect="osmexo",
            cost_unit="usd", speech_model="tts-1", api_key_env="HOME",
        )  # fmt: skip
        configs.forget_configs()
        return _answer(alice, ANSWER, osmexo)

    # Osmexo has no /audio/speech: its answers are read by the default gateway, which speaks.
    assert ">Read aloud</button>" in await fragment(alice, await sync_to_async(osmexo_answer)())


async def test_the_sweep_interrupts_a_dead_read_aloud_and_settles_its_cost(alice: Any) -> None:
    answer = await an_answer(alice, "emulator/audio")

    def dead_read_aloud() -> Generation:
        old = Generation.objects.get(message=answer).started_at.replace(year=2000)
        return Generation.objects.create(
            kind="speech", read_aloud=answer, conversation_id=answer.conversation_id,
            gateway_id=answer.conversation.gateway_id, model="emulator/audio", dialect="numes",
            heartbeat_at=old,
        )  # fmt: skip

    read_aloud = await sync_to_async(dead_read_aloud)()
    assert await sweep.sweep_stale_generations() == 1
    await read_aloud.arefresh_from_db()
    assert read_aloud.status == "interrupted"
    assert read_aloud.error_message == "The server stopped while reading this answer aloud."
    chat = await Generation.objects.aget(message=answer)
    assert chat.status == "completed", "the answer it read is untouched"

    await Generation.objects.filter(pk=read_aloud.pk).aupdate(
        finished_at=chat.started_at.replace(year=2000)
    )
    assert await sweep.reconcile_pending() == 1
    await read_aloud.arefresh_from_db()
    assert read_aloud.cost_source == "unavailable"
    assert "reported no cost for this read aloud" in read_aloud.cost_note


async def test_a_read_aloud_is_in_the_cost_ledger(alice: Any, django_user_model: Any) -> None:
    answer = await an_answer(alice, PACED)
    await AsgiRequest(read_aloud_url(answer), await session_headers(alice)).start().finish()
    read_aloud = await read_aloud_of(answer, status="completed")
    admin = await sync_to_async(django_user_model.objects.create_superuser)("root", password="x")
    client = AsyncClient()
    await client.aforce_login(admin)
    page = await client.get(reverse("admin:chatapp_generation_changelist"), {"kind": "speech"})
    html = page.content.decode()
    assert f"Read aloud of answer #{answer.pk}" in html
    assert "read aloud" in html  # the kind
    assert str(Money(read_aloud.cost, CostUnit(read_aloud.cost_unit))) in html
    export = await client.get(reverse("admin:chatapp_generation_export"), {"kind": "speech"})
    rows = b"".join([piece async for piece in export.streaming_content]).decode().split("\r\n")
    assert rows[1].split(",")[-3:] == ["speech", "1", ""]  # kind, one generation, no group
    assert rows[2:] == [""], "one row: the reading"
