"""Voice input's endpoint against the real emulator: the text back, the ledger row with its cost,
the spending limits checked first, and each refusal in words."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient
from django.urls import reverse

from chatapp.gateways import configs
from chatapp.models import Conversation, Gateway, Generation, SpendingLimit
from chatapp.streaming import sweep
from chatapp.transcription.offer import can_transcribe
from tests.chatapp.conftest import UpstreamLog, logged_in
from tests.gateway_client.test_transcription import tone

pytestmark = [pytest.mark.django_db(transaction=True)]

URL = reverse("chat:transcribe")


def _default_transcribes(model: str) -> Gateway:
    _, default_pk = configs.configs(force=True)
    Gateway.objects.filter(pk=default_pk).update(transcription_model=model)
    configs.forget_configs()
    return Gateway.objects.get(pk=default_pk)


async def default_transcribes(model: str = "emulator/audio") -> Gateway:
    """The default gateway (the emulator's Numes) transcribes with `model` ("": it does not)."""
    return await sync_to_async(_default_transcribes)(model)


async def post(client: AsyncClient, audio: bytes, **fields: Any) -> Any:
    upload = SimpleUploadedFile("voice.wav", audio, content_type=fields.pop("type", "audio/wav"))
    return await client.post(URL, {"audio": upload, **fields})


async def test_a_recording_comes_back_as_text_and_is_a_generation_with_its_cost(
    alice: Any, upstream: UpstreamLog
) -> None:
    gateway = await default_transcribes()
    conversation = await Conversation.objects.acreate(user=alice, gateway=gateway)
    audio = tone(2.0)
    client = await logged_in(alice)
    response = await post(client, audio, seconds="2.0", conversation=str(conversation.pk))
    assert response.status_code == 200
    digest = hashlib.sha256(audio).hexdigest()[:8]
    assert response.json() == {
        "text": f"Emulated transcript of 2.0 seconds of audio ({len(audio):,} bytes, "
        f"sha256 {digest})."
    }
    (sent,) = upstream.new(endpoint="audio/transcriptions")
    assert sent.bytes_delivered == len(audio), "the recording was sent once, whole"
    generation = await Generation.objects.aget(kind="transcription")
    assert generation.status == "completed"
    assert (generation.user_id, generation.conversation_id) == (alice.pk, conversation.pk)
    assert generation.gateway_id == gateway.pk
    assert generation.model == "emulator/audio"
    assert generation.upstream_id == sent.id
    assert generation.cost_source == "stream"
    assert generation.cost == Decimal("0.0002")  # 2 s at $0.0001, as the usage said
    assert generation.cost_unit == "usd"
    assert generation.usage is not None
    assert generation.usage["seconds"] == 2


async def test_a_gateway_that_refuses_fails_the_generation_unbilled_and_says_why(
    alice: Any, upstream: UpstreamLog
) -> None:
    await default_transcribes("emulator/error-before")
    response = await post(await logged_in(alice), tone(0.5))
    assert response.status_code == 502
    assert response.json()["error"] == (
        "The gateway could not transcribe the recording: Insufficient credits"
    )
    generation = await Generation.objects.aget(kind="transcription")
    assert generation.status == "failed"
    assert generation.error_status == 402


async def test_a_gateway_without_the_endpoint_says_so(
    alice: Any, settings: Any, emulator_url: str
) -> None:
    settings.CHAT_KEY_ENV_ALLOWED = ("HOME",)  # a variable always set, as the row's key

    def elsewhere() -> Gateway:
        # The emulator answers 404 under a path it does not serve, as a gateway without it does.
        gateway = Gateway.objects.create(
            name="Elsewhere", base_url=f"{emulator_url}/numes/api/v9", dialect="numes",
            cost_unit="usd", transcription_model="whisper-1", api_key_env="HOME",
        )  # fmt: skip
        configs.forget_configs()
        return gateway

    gateway = await sync_to_async(elsewhere)()
    conversation = await Conversation.objects.acreate(user=alice, gateway=gateway)
    response = await post(await logged_in(alice), tone(0.5), conversation=str(conversation.pk))
    assert response.status_code == 502
    assert response.json()["error"].startswith("This gateway does not transcribe speech")
    generation = await Generation.objects.aget(kind="transcription")
    assert (generation.gateway_id, generation.status) == (gateway.pk, "failed")
    assert generation.cost_source == "not_billed", "refused before it began"


async def test_no_gateway_that_transcribes_is_refused_in_words(alice: Any) -> None:
    def nowhere() -> None:
        _default_transcribes("")
        Gateway.objects.update(transcription_model="")
        configs.forget_configs()

    await sync_to_async(nowhere)()
    assert not await sync_to_async(can_transcribe)()
    response = await post(await logged_in(alice), tone(0.5))
    assert response.status_code == 409
    assert response.json()["error"].startswith("No gateway here can turn speech into text")
    assert not await Generation.objects.filter(kind="transcription").aexists()


async def test_a_spending_limit_is_checked_before_anything_is_sent(
    alice: Any, upstream: UpstreamLog
) -> None:
    await default_transcribes()
    await SpendingLimit.objects.acreate(
        user=alice, unit="usd", amount=Decimal(1), unknown_price="refuse"
    )
    response = await post(await logged_in(alice), tone(0.5))
    assert response.status_code == 409
    assert (
        "This transcription cannot be priced (voice input is not priced here)"
        in (response.json()["error"])
    )
    assert not upstream.new(endpoint="audio/transcriptions")
    refused = await Generation.objects.aget(kind="transcription")
    assert (refused.status, refused.cost_source) == ("failed", "not_billed")


async def test_too_long_and_too_large_recordings_are_refused_before_anything_is_spent(
    alice: Any, upstream: UpstreamLog, settings: Any
) -> None:
    await default_transcribes()
    settings.CHAT_VOICE_MAX_SECONDS = 2
    client = await logged_in(alice)
    long = await post(client, tone(3.5))  # the WAV's header says how long, whatever was claimed
    assert long.status_code == 413
    assert long.json()["error"] == (
        "The recording is 4 s long; voice input takes at most 2 s. Record a shorter one."
    )
    claimed = await post(client, b"\x1aE\xdf\xa3" + bytes(100), type="audio/webm", seconds="185")
    assert claimed.json()["error"].startswith("The recording is 3 min 5 s long;")
    settings.CHAT_VOICE_MAX_BYTES = 1000
    large = await post(client, bytes(2000), type="audio/webm")
    assert large.status_code == 413
    assert large.json()["error"] == (
        "The recording is 2.0 KB; voice input takes at most 1,000 bytes. Record a shorter one."
    )
    odd = await post(client, b"GIF89a", type="image/gif")
    assert odd.status_code == 415
    assert not upstream.new(endpoint="audio/transcriptions")
    assert not await Generation.objects.filter(kind="transcription").aexists()


async def test_anonymous_and_get_requests_are_refused(alice: Any) -> None:
    anonymous = await AsyncClient().post(URL, {})
    assert anonymous.status_code == 302
    got = await (await logged_in(alice)).get(URL)
    assert got.status_code == 405


async def test_the_sweep_interrupts_a_dead_transcription(alice: Any) -> None:
    gateway = await default_transcribes()

    def dead() -> Generation:
        return Generation.objects.create(
            kind="transcription", user=alice, gateway=gateway, model="emulator/audio",
            dialect="numes",
        )  # fmt: skip

    generation = await sync_to_async(dead)()
    await Generation.objects.filter(pk=generation.pk).aupdate(
        heartbeat_at=None, started_at=generation.started_at.replace(year=2000)
    )
    assert await sweep.sweep_stale_generations() == 1
    await generation.arefresh_from_db()
    assert generation.status == "interrupted"
    assert generation.error_message == "The server stopped while it transcribed a recording."


async def test_a_cost_the_gateway_does_not_report_is_explained(
    alice: Any, settings: Any, emulator_url: str
) -> None:
    settings.CHAT_KEY_ENV_ALLOWED = ("HOME",)

    def tiny() -> Gateway:
        gateway = Gateway.objects.create(
            name="Tiny", base_url=f"{emulator_url}/tiny/v1", dialect="tiny",
            cost_unit="credits", transcription_model="emulator/audio", api_key_env="HOME",
        )  # fmt: skip
        configs.forget_configs()
        return gateway

    gateway = await sync_to_async(tiny)()
    conversation = await Conversation.objects.acreate(user=alice, gateway=gateway)
    response = await post(await logged_in(alice), tone(1.0), conversation=str(conversation.pk))
    assert response.json()["text"].startswith("Emulated transcript of 1.0 seconds")
    generation = await Generation.objects.aget(kind="transcription")
    assert generation.status == "completed"
    assert generation.cost is None
    assert generation.cost_source == "unavailable"
    assert generation.cost_note == (
        "tiny-3b reported no cost for this transcription, and transcription prices are not kept "
        "here"
    )
