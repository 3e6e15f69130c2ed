"""Image generations end to end against the emulator's Numes `/images` over loopback: the
request, the live previews, the stored finals and their cost, errors, Stop, and the pages."""

from __future__ import annotations

import asyncio
import base64
import re
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations.models import Message
from chatapp.conversations.turns import Answerer, StartedGeneration, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import catalog, configs
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.emulator.media import png_b64
from gateway_client.emulator.numes_media import IMAGE_PRICE
from tests.chatapp.conftest import GroupListener, UpstreamLog

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
PROMPT = "a lighthouse at dusk"


async def image_turn(user: Any, model: str = "emulator/image", count: int = 2) -> StartedGeneration:
    owner = await worker.owner_channel()
    return await sync_to_async(create_turn)(
        user,
        TurnRequest(
            text=PROMPT,
            answerer=Answerer(model=model, kind=Generation.Kind.IMAGE, image_count=count),
        ),
        owner,
    )


async def run(started: StartedGeneration) -> tuple[Generation, GroupListener]:
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    return generation, listener


def previews(listener: GroupListener) -> list[tuple[int, bool]]:
    """What the browsers were shown, in order: (image index, partial) per picture."""
    return [(i, partial) for d in listener.deltas() for i, _, partial in d.get("previews", [])]


async def test_previews_then_finals_stream_and_the_finals_are_stored_with_their_cost(
    alice: Any, upstream: UpstreamLog
) -> None:
    generation, listener = await run(await image_turn(alice))
    record = await upstream.one(endpoint="images")
    assert record.model == "emulator/image"
    assert record.tokens_prompt == len(PROMPT), "the prompt is the user's message"
    assert record.final_outcome == "completed"
    shown = previews(listener)
    assert shown[0] == (0, True), "the first preview goes at once"
    for index in (0, 1):
        # Pictures arriving within one tick are coalesced to the newest: at least the final.
        seen = [partial for i, partial in shown if i == index]
        assert seen[-1] is False
        assert seen.count(False) == 1
    assert generation.kind == Generation.Kind.IMAGE
    assert generation.status == Generation.Status.COMPLETED
    assert generation.cost == Decimal(str(2 * IMAGE_PRICE))
    assert generation.cost_source == Generation.CostSource.STREAM
    assert generation.usage is not None
    assert generation.usage["output_images"] == 2
    assert generation.upstream_id == record.id
    stored = generation.message.attachments
    assert [(a["kind"], a["media_type"], a["preview"]) for a in stored] == [
        ("image", "image/png", False),
        ("image", "image/png", False),
    ]
    assert [a["data"] for a in stored] == [png_b64(f"{PROMPT}#{i}") for i in range(2)]


async def test_an_error_frame_fails_the_generation_and_keeps_the_preview_marked(
    alice: Any,
) -> None:
    generation, listener = await run(await image_turn(alice, "emulator/error-midstream", 1))
    assert previews(listener) == [(0, True)]
    assert generation.status == Generation.Status.FAILED
    assert generation.error_type == "provider_unavailable"
    assert generation.error_status == 503
    assert generation.error_message
    (kept,) = generation.message.attachments
    assert kept["preview"] is True


async def test_stop_closes_the_image_stream(alice: Any, upstream: UpstreamLog) -> None:
    started = await image_turn(alice, "emulator/image?tokens_per_second=1", 4)
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    first = await listener.until("delta")
    assert [partial for _, _, partial in first["previews"]] == [True]
    await get_channel_layer().send(
        started.job.owner_channel, socket_messages.cancel(started.job.generation_pk)
    )
    done = await listener.until("done", within=2)
    assert done["status"] == "cancelled"
    record = await upstream.finished(await upstream.one(endpoint="images"))
    assert record.final_outcome == "cancelled", "Stop closed the upstream stream"
    assert record.cancelled_at is not None
    await asyncio.wait_for(task, 10)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.status == Generation.Status.CANCELLED
    assert [a["preview"] for a in generation.message.attachments] == [True]


async def test_a_reload_mid_generation_gets_the_newest_preview_in_the_snapshot(
    alice: Any,
) -> None:
    started = await image_turn(alice, "emulator/image?tokens_per_second=1", 2)
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    shown = (await listener.until("delta"))["previews"]
    layer = get_channel_layer()
    reply_to = await layer.new_channel()
    await layer.send(
        started.job.owner_channel,
        socket_messages.snapshot_request(started.job.generation_pk, reply_to),
    )
    async with asyncio.timeout(5):
        snapshot = socket_messages.decode((await layer.receive(reply_to))["text"])
    assert snapshot["t"] == "snapshot"
    assert snapshot["previews"] == shown
    assert snapshot["attachments"] == []
    await layer.send(started.job.owner_channel, socket_messages.cancel(started.job.generation_pk))
    await asyncio.wait_for(task, 10)


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def test_the_picker_marks_image_models_on_numes_only(alice: Any) -> None:
    await sync_to_async(configs.add_emulator_gateways)()
    groups = await catalog.catalog()
    painters = {
        group.config.name: [c.model for c in group.choices if c.generates_images]
        for group in groups
    }
    assert painters == {
        "Default gateway": ["emulator/image"],  # the emulator's Numes, as LLM_BASE_URL
        "Emulator (Numes)": ["emulator/image"],
        "Emulator (Osmexo)": [],  # no `/images` there: its emulator/image is a chat model
        "Emulator (Nodul)": [],
        "Emulator (tiny-3b)": [],
    }
    html = (await (await logged_in(alice)).get(reverse("chat:home"))).content.decode()
    options = re.findall(r'<option [^>]*data-output="image"[^>]*>[^<]*</option>', html)
    assert len(options) == 2
    assert all(":emulator/image" in o and "Emulator: image · image" in o for o in options)
    assert 'id="image-count" name="images"' in html


async def test_sending_to_an_image_model_generates_images_served_from_our_origin(
    alice: Any, bob: Any, upstream: UpstreamLog
) -> None:
    client = await logged_in(alice)
    (choice,) = [c.value for g in await catalog.catalog() for c in g.choices if c.generates_images]
    response = await client.post(
        reverse("chat:send_new"), {"content": PROMPT, "model": choice, "images": "2"}
    )
    assert response.status_code == 302
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
    generation = await Generation.objects.select_related("message").alatest("pk")
    assert generation.kind == Generation.Kind.IMAGE
    assert generation.status == Generation.Status.COMPLETED
    assert (await upstream.one(endpoint="images")).final_outcome == "completed"
    assert not upstream.new(endpoint="chat/completions"), "no chat request went out"
    message = generation.message

    fragment = (await client.get(reverse("chat:message", args=[message.pk]))).content.decode()
    sources = re.findall(r'<img class="image" src="([^"]+)"', fragment)
    assert sources == [reverse("chat:attachment", args=[message.pk, i]) for i in range(2)]
    assert 'data-kind="image"' in fragment
    assert "2 images" in fragment
    assert "$0.08" in fragment
    assert "data:image" not in fragment, "not inlined"

    image = await client.get(sources[0])
    assert image.status_code == 200
    assert image["Content-Type"] == "image/png"
    assert image["X-Content-Type-Options"] == "nosniff"
    assert image["Content-Disposition"].startswith("inline")
    assert image.content == base64.b64decode(png_b64(f"{PROMPT}#0"))
    assert (await (await logged_in(bob)).get(sources[0])).status_code == 404


async def test_the_count_chosen_stays_in_the_composer_of_the_conversation_swapped_in(
    alice: Any,
) -> None:
    client = await logged_in(alice)
    (choice,) = [c.value for g in await catalog.catalog() for c in g.choices if c.generates_images]
    response = await client.post(
        reverse("chat:send_new"), {"content": PROMPT, "model": choice, "images": "2"}, headers=HTMX
    )
    assert response["HX-Retarget"] == "main.chat"
    count = response.content.decode().split('<select id="image-count" name="images">')[1]
    assert count.split("</select>")[0].strip() == (
        '<option value="1">1</option><option value="2" selected>2</option>'
        '<option value="4">4</option>'
    )
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


async def test_regenerate_and_edit_of_an_image_answer_generate_images_again(
    alice: Any, upstream: UpstreamLog
) -> None:
    client = await logged_in(alice)
    (choice,) = [c.value for g in await catalog.catalog() for c in g.choices if c.generates_images]
    first, _ = await run(await image_turn(alice, count=2))

    async def latest_after(response: Any) -> Generation:
        assert response.status_code == 200
        await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
        return await Generation.objects.select_related("message").alatest("pk")

    # With the picker's image model and count, and with no model (the answer's own).
    again = await latest_after(
        await client.post(
            reverse("chat:retry", args=[first.message.pk]),
            {"model": choice, "images": "1"},
            headers=HTMX,
        )
    )
    assert again.kind == Generation.Kind.IMAGE
    assert len(again.message.attachments) == 1
    same = await latest_after(
        await client.post(reverse("chat:retry", args=[first.message.pk]), headers=HTMX)
    )
    assert same.kind == Generation.Kind.IMAGE
    assert len(same.message.attachments) == 2, "as many as the answer it redoes"
    edited = await latest_after(
        await client.post(
            reverse("chat:edit", args=[first.message.parent_id]),
            {"content": "a lighthouse at dawn", "model": choice, "images": "2"},
            headers=HTMX,
        )
    )
    assert edited.kind == Generation.Kind.IMAGE
    question = await Message.objects.aget(pk=edited.message.parent_id)
    assert question.content == "a lighthouse at dawn"
    assert len(upstream.new(endpoint="images")) == 4  # the answer and its three versions
    assert not upstream.new(endpoint="chat/completions"), "no chat request went out"


async def test_stored_bytes_that_are_not_an_image_are_never_served_as_one(alice: Any) -> None:
    started = await image_turn(alice, count=1)
    await asyncio.wait_for(worker.start(started.job), 30)
    svg = base64.b64encode(b"<svg onload='alert(1)'/>").decode()
    await sync_to_async(type(started.assistant).objects.filter(pk=started.assistant.pk).update)(
        attachments=[{"kind": "image", "media_type": "image/png", "data": svg}]
    )
    client = await logged_in(alice)
    url = reverse("chat:attachment", args=[started.assistant.pk, 0])
    served = await client.get(url)
    assert served["Content-Type"] == "application/octet-stream", "its bytes are not an image"
    assert served["Content-Disposition"].startswith("attachment")


async def test_the_admin_ledger_lists_image_generations(alice: Any) -> None:
    await run(await image_turn(alice, count=1))
    await sync_to_async(type(alice).objects.filter(pk=alice.pk).update)(
        is_staff=True, is_superuser=True
    )
    client = await logged_in(alice)
    url = reverse("admin:chatapp_generation_changelist")
    html = (await client.get(url, {"kind__exact": "image"})).content.decode()
    assert "image generation" in html
    assert "emulator/image" in html
    assert "usage chunk" in html
