"""The generation worker against the real emulator over loopback."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import orjson
import pytest
from channels.layers import get_channel_layer

from chatapp import worker, ws_protocol
from chatapp.models import Generation, Message

from .conftest import GroupListener, start_turn

pytestmark = [pytest.mark.django_db(transaction=True)]


async def run_turn(user: Any, text: str, model: str) -> tuple[Generation, GroupListener]:
    turn = await start_turn(user, text, model)
    listener = await GroupListener(turn.conversation.pk).join()
    task = worker.start(turn.job)
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    generation = await Generation.objects.select_related("message").aget(pk=turn.generation.pk)
    return generation, listener


def joined(deltas: list[dict[str, Any]], field: str) -> str:
    return "".join(d.get(field, "") for d in deltas)


async def test_completed_answer_is_streamed_in_order_and_persisted(alice: Any) -> None:
    generation, listener = await run_turn(alice, "Tell me about otters", "emulator/long")
    deltas = listener.deltas()
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    # Coalesced: thousands of tokens, far fewer channel messages.
    assert 1 <= len(deltas) < 200
    message = generation.message
    assert len(message.content) > 2000
    assert joined(deltas, "content") == message.content
    done = listener.received[-1]
    expected = {"t": "done", "g": generation.pk, "seq": deltas[-1]["seq"], "status": "completed"}
    assert done == expected
    assert generation.status == "completed"
    assert generation.last_seq == deltas[-1]["seq"]
    assert generation.upstream_id
    assert generation.finish_reason == "stop"
    assert generation.completion_tokens
    assert generation.prompt_tokens
    assert generation.cost is not None
    assert generation.cost_unit
    assert generation.ttft_ms is not None
    assert generation.finished_at is not None


async def test_echo_is_exact_and_cost_comes_from_the_usage_chunk(alice: Any) -> None:
    text = "The quick brown fox jumps over the lazy dog, 12 times!"
    generation, _ = await run_turn(alice, text, "emulator/echo")
    assert generation.message.content == text
    assert generation.cost_source == Generation.CostSource.STREAM


async def test_reasoning_streams_apart_from_the_answer(alice: Any) -> None:
    generation, listener = await run_turn(alice, "Why is the sky blue?", "emulator/reasoning")
    message = generation.message
    assert message.reasoning
    assert message.content
    assert joined(listener.deltas(), "reasoning") == message.reasoning
    assert joined(listener.deltas(), "content") == message.content
    assert message.reasoning not in message.content
    assert message.reasoning_details, "Numes reasoning details are kept to send back"


async def test_error_before_the_stream_is_recorded_with_code_and_message(alice: Any) -> None:
    generation, listener = await run_turn(alice, "hello", "emulator/error-before")
    assert generation.status == "failed"
    assert generation.error_status
    assert generation.error_status >= 400
    assert generation.error_message
    assert generation.message.content == ""
    assert listener.deltas() == []
    assert generation.cost_source == Generation.CostSource.NONE


async def test_error_midstream_keeps_the_partial_answer(alice: Any) -> None:
    generation, listener = await run_turn(alice, "hello there", "emulator/error-midstream")
    assert generation.status == "failed"
    assert generation.message.content
    assert joined(listener.deltas(), "content") == generation.message.content
    assert generation.error_code
    assert generation.error_message
    # No usage chunk on a failed stream: the cost comes from the generation record.
    assert generation.cost_source in {"record", "none"}


async def test_a_dropped_connection_is_incomplete(alice: Any) -> None:
    generation, _ = await run_turn(alice, "hello there", "emulator/drop")
    assert generation.status == "incomplete"
    assert generation.message.content


async def test_a_stalled_stream_fails_with_the_partial_kept(alice: Any) -> None:
    generation, _ = await run_turn(alice, "hello there", "emulator/stall")
    assert generation.status == "failed"
    assert generation.message.content
    assert "stalled" in generation.error_message or generation.error_code


async def test_tool_calls_stream_into_their_own_field(alice: Any) -> None:
    # The app offers no tools, so the emulator calls its demo `get_weather`.
    generation, listener = await run_turn(alice, "weather in Lisbon", "emulator/tools")
    assert generation.status == "completed"
    assert generation.finish_reason == "tool_calls"
    assert generation.message.content == ""
    (call,) = generation.message.tool_calls
    assert call["name"] == "get_weather"
    assert call["id"].startswith("call_")
    assert orjson.loads(call["arguments"]) == {"city": "Lisbon", "unit": "celsius"}
    fragments = [c for d in listener.deltas() for c in d.get("tool_calls", [])]
    assert fragments[0]["name"] == "get_weather"
    assert "".join(f["arguments"] for f in fragments) == call["arguments"]
    assert not any("content" in d for d in listener.deltas())


async def test_citations_are_kept(alice: Any) -> None:
    generation, listener = await run_turn(alice, "otters rivers", "emulator/citations")
    assert generation.message.annotations
    urls = [a.get("url") for d in listener.deltas() for a in d.get("annotations", [])]
    assert any(u and u.startswith("https://") for u in urls)


async def test_images_become_safe_attachments(alice: Any) -> None:
    generation, _ = await run_turn(alice, "a cat", "emulator/image")
    images = [a for a in generation.message.attachments if a["kind"] == "image"]
    assert images
    assert images[0]["url"].startswith("data:image/png;base64,")


async def test_cancel_before_the_first_token_closes_upstream(alice: Any, emulator_url: Any) -> None:
    turn = await start_turn(alice, "hello", "emulator/slow-start?slow_start_s=5")
    listener = await GroupListener(turn.conversation.pk).join()
    task = worker.start(turn.job)
    record = None
    for _ in range(200):
        await asyncio.sleep(0.01)
        record = emulator_url.app.records.latest(scenario="slow-start")
        if record is not None and record.cancelled_at is None and record.finished_at is None:
            break
    assert record is not None
    clicked = time.time()
    await get_channel_layer().send(turn.job.owner_channel, ws_protocol.cancel())
    done = await listener.until("done", within=2)
    assert done["status"] == "cancelled"
    for _ in range(100):
        if record.cancelled_at:
            break
        await asyncio.sleep(0.01)
    assert record.cancelled_at is not None
    assert record.cancelled_at - clicked < 0.2
    await asyncio.wait_for(task, 10)
    generation = await Generation.objects.aget(pk=turn.generation.pk)
    assert generation.status == "cancelled"
    assert generation.cost_source in {"record", "none"}


async def test_cancel_mid_stream_keeps_partial_text(alice: Any, emulator_url: Any) -> None:
    turn = await start_turn(alice, "otters", "emulator/long?tokens_per_second=200")
    listener = await GroupListener(turn.conversation.pk).join()
    task = worker.start(turn.job)
    await listener.until("delta")
    await listener.until("delta")
    await get_channel_layer().send(turn.job.owner_channel, ws_protocol.cancel())
    done = await listener.until("done", within=2)
    assert done["status"] == "cancelled"
    await asyncio.wait_for(task, 30)
    generation = await Generation.objects.select_related("message").aget(pk=turn.generation.pk)
    assert generation.status == "cancelled"
    content = generation.message.content
    assert content
    assert joined(listener.deltas(), "content") == content
    assert generation.last_seq == listener.deltas()[-1]["seq"]
    record = emulator_url.app.records.get(generation.upstream_id)
    assert record is not None
    assert record.cancelled_at is not None
    # The cancelled stream had no usage chunk: reconciled from the generation record.
    assert generation.cost_source == Generation.CostSource.RECORD
    assert generation.cost is not None


async def test_snapshot_plus_later_deltas_rebuild_the_text(alice: Any) -> None:
    turn = await start_turn(alice, "otters", "emulator/long?tokens_per_second=300&long_tokens=400")
    listener = await GroupListener(turn.conversation.pk).join()
    task = worker.start(turn.job)
    await listener.until("delta")
    await listener.until("delta")
    layer = get_channel_layer()
    reply = await layer.new_channel()
    await layer.send(turn.job.owner_channel, ws_protocol.snapshot_request(reply))
    snapshot = orjson.loads((await asyncio.wait_for(layer.receive(reply), 5))["text"])
    assert snapshot["t"] == "snapshot"
    assert snapshot["g"] == turn.generation.pk
    await listener.until("done", within=30)
    await asyncio.wait_for(task, 30)
    later = [d for d in listener.deltas() if d["seq"] > snapshot["seq"]]
    message = await Message.objects.aget(pk=turn.assistant.pk)
    assert snapshot["content"] + joined(later, "content") == message.content


async def test_partial_text_is_flushed_while_streaming(alice: Any, settings: Any) -> None:
    settings.CHAT_FLUSH_INTERVAL = 0.2
    turn = await start_turn(alice, "otters", "emulator/long?tokens_per_second=100")
    task = worker.start(turn.job)
    await asyncio.sleep(0.8)
    generation = await Generation.objects.select_related("message").aget(pk=turn.generation.pk)
    assert generation.status == "streaming"
    assert generation.heartbeat_at is not None
    assert generation.last_seq > 0
    flushed = generation.message.content
    assert flushed
    await get_channel_layer().send(turn.job.owner_channel, ws_protocol.cancel())
    await asyncio.wait_for(task, 30)
    final = await Message.objects.aget(pk=turn.assistant.pk)
    assert final.content.startswith(flushed)
    assert len(final.content) > len(flushed)


async def test_audio_pieces_are_kept_as_one_clip(alice: Any) -> None:
    generation, listener = await run_turn(alice, "otters", "emulator/audio")
    assert generation.status == "completed"
    (audio,) = generation.message.attachments
    assert audio["kind"] == "audio"
    assert audio["media_type"] == "audio/wav"
    assert base64.b64decode(audio["data"])[:4] == b"RIFF"
    assert audio["transcript"].startswith("Here is a short spoken answer about otters")
    notes = [kind for d in listener.deltas() for kind in d.get("attachments", [])]
    assert notes == ["audio"], "browsers hear of the clip once, without its bytes"


async def test_files_are_kept_for_download(alice: Any) -> None:
    generation, listener = await run_turn(alice, "otters", "emulator/files")
    table, picture = generation.message.attachments
    assert table["kind"] == picture["kind"] == "file"
    assert table["filename"] == "otters.csv"
    assert base64.b64decode(table["data"]).startswith(b"word,letters,reversed")
    assert picture["media_type"] == "image/png"
    notes = [kind for d in listener.deltas() for kind in d.get("attachments", [])]
    assert notes == ["file", "file"]
