"""The generation worker against the real emulator over loopback."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from decimal import Decimal
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatapp.conversations.jobs import Job
from chatapp.conversations.models import Message
from chatapp.conversations.request_options import RequestOptions
from chatapp.costs.models import Generation
from chatapp.gateways import configs, key_vault
from chatapp.gateways.models import Gateway
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorRecord
from gateway_client.emulator.text import markdown_answer, split_tokens
from gateway_client.events import TextDelta
from tests.chatapp.conftest import GroupListener, UpstreamLog, start_turn
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]

SLOW_START_S = 5  # the slow-start scenario's silence before its first token


async def run_turn(user: Any, text: str, model: str) -> tuple[Generation, GroupListener]:
    started = await start_turn(user, text, model)
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    return generation, listener


def joined(deltas: list[dict[str, Any]], field: str) -> str:
    return "".join(d.get(field, "") for d in deltas)


async def settled_record(upstream: UpstreamLog, generation: Generation) -> EmulatorRecord:
    """The emulator's record of `generation`'s request, once it shows its final outcome."""
    assert generation.upstream_id, "the gateway's generation ID was recorded"
    return await upstream.settled(generation.upstream_id)


async def assert_cost_from_record(upstream: UpstreamLog, generation: Generation) -> None:
    """No usage chunk ended the stream, so the cost is reconciled from Numes' generation record:
    the amount and counts the emulator billed, not an estimate and not `none`."""
    record = await settled_record(upstream, generation)
    assert generation.cost_source == Generation.CostSource.RECORD
    assert generation.cost == Decimal(str(record.total_cost))
    assert generation.cost > 0
    assert generation.cost_unit == "usd", "the default Numes gateway bills in US dollars"
    assert generation.completion_tokens == record.tokens_completion
    assert generation.prompt_tokens == record.tokens_prompt
    assert generation.reconcile_attempts == 1


async def test_completed_answer_is_streamed_in_order_and_persisted(
    alice: Any, upstream: UpstreamLog
) -> None:
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
    assert generation.finish_reason == "stop"
    # The usage chunk's counts and cost are what the gateway billed.
    record = await settled_record(upstream, generation)
    assert record.final_outcome == "completed"
    assert generation.completion_tokens == record.tokens_completion
    assert generation.prompt_tokens == record.tokens_prompt
    assert generation.cost == Decimal(str(record.total_cost))
    assert generation.cost_unit == "usd", "the default Numes gateway bills in US dollars"
    assert generation.cost_source == Generation.CostSource.STREAM
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
    assert generation.error_status == 402
    assert generation.error_code == "402"
    assert generation.error_type == "insufficient_credits"
    assert generation.error_message == "Insufficient credits"
    assert generation.message.content == ""
    assert listener.deltas() == []
    # Refused before the stream: no generation ID, nothing to reconcile, nothing billed.
    assert generation.upstream_id == ""
    assert generation.cost is None
    assert generation.cost_source == Generation.CostSource.NOT_BILLED
    assert generation.cost_note == "refused before the answer began"


async def test_error_midstream_keeps_the_partial_answer(alice: Any, upstream: UpstreamLog) -> None:
    generation, listener = await run_turn(alice, "hello there", "emulator/error-midstream")
    assert generation.status == "failed"
    assert generation.message.content
    assert joined(listener.deltas(), "content") == generation.message.content
    assert generation.error_status == 503
    assert generation.error_code == "503"
    assert generation.error_type == "provider_unavailable"
    assert generation.error_message == "provider became unavailable"
    await assert_cost_from_record(upstream, generation)


async def test_a_dropped_connection_is_incomplete(alice: Any, upstream: UpstreamLog) -> None:
    generation, listener = await run_turn(alice, "hello there", "emulator/drop")
    assert generation.status == "incomplete"
    # Every token received is kept, and the final render is of all of them (#45).
    record = await settled_record(upstream, generation)
    tokens = split_tokens(markdown_answer("hello there"))[: record.tokens_completion]
    assert generation.message.content == "".join(tokens)  # what the emulator says it sent
    assert joined(listener.deltas(), "content") == generation.message.content
    assert generation.message.html.startswith("<h2>About")
    assert generation.error_type == "incomplete"
    await assert_cost_from_record(upstream, generation)


async def test_a_stalled_stream_fails_with_the_partial_kept(
    alice: Any, upstream: UpstreamLog
) -> None:
    generation, _ = await run_turn(alice, "hello there", "emulator/stall")
    assert generation.status == "failed"
    assert generation.message.content
    assert generation.error_code == "idle_timeout"
    assert generation.error_type == "timeout"
    assert generation.error_message == (
        "The answer stalled: the gateway went quiet (no new event within 1 s (idle deadline))."
    )
    await assert_cost_from_record(upstream, generation)


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
    images = [a for a in generation.message.attachments if a["kind"] == "image_url"]
    assert images
    assert images[0]["url"].startswith("data:image/png;base64,")


async def test_cancel_before_the_first_token_closes_upstream(
    alice: Any, upstream: UpstreamLog
) -> None:
    started = await start_turn(alice, "hello", f"emulator/slow-start?slow_start_s={SLOW_START_S}")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    record = await upstream.one(scenario="slow-start")
    clicked = time.time()
    await get_channel_layer().send(
        started.job.owner_channel, socket_messages.cancel(started.job.generation_pk)
    )
    done = await listener.until("done")
    assert done["status"] == "cancelled"
    record = await upstream.finished(record)
    assert record.final_outcome == "cancelled"
    assert record.tokens_completion == 0
    assert record.cancelled_at is not None
    # Closed by the cancel (after it), not by waiting out the slow start (before its end).
    assert clicked <= record.cancelled_at < record.created_at + SLOW_START_S
    await asyncio.wait_for(task, 10)
    generation = await Generation.objects.aget(pk=started.generation.pk)
    assert generation.status == "cancelled"
    # Numes sends nothing, not even headers, before the first token: the generation ID never
    # arrived, so there is no record to ask; with no price known, the reason is on record.
    assert generation.upstream_id == ""
    assert generation.cost is None
    assert generation.cost_source == Generation.CostSource.UNAVAILABLE
    assert generation.cost_note == (
        "Numes reported no cost for this answer and no price is configured for "
        "emulator/slow-start?slow_start_s=5"
    )
    assert generation.reconcile_attempts == 0


async def test_cancel_mid_stream_keeps_partial_text(alice: Any, upstream: UpstreamLog) -> None:
    started = await start_turn(alice, "otters", "emulator/long?tokens_per_second=200")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("delta")
    await listener.until("delta")
    await get_channel_layer().send(
        started.job.owner_channel, socket_messages.cancel(started.job.generation_pk)
    )
    done = await listener.until("done", within=2)
    assert done["status"] == "cancelled"
    await asyncio.wait_for(task, 30)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.status == "cancelled"
    content = generation.message.content
    assert content
    assert joined(listener.deltas(), "content") == content
    assert generation.last_seq == listener.deltas()[-1]["seq"]
    record = await settled_record(upstream, generation)
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    await assert_cost_from_record(upstream, generation)


async def test_snapshot_plus_later_deltas_rebuild_the_text(alice: Any) -> None:
    started = await start_turn(
        alice, "otters", "emulator/long?tokens_per_second=300&long_tokens=400"
    )
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("delta")
    await listener.until("delta")
    layer = get_channel_layer()
    reply = await layer.new_channel()
    await layer.send(
        started.job.owner_channel,
        socket_messages.snapshot_request(started.job.generation_pk, reply),
    )
    snapshot = orjson.loads((await asyncio.wait_for(layer.receive(reply), 5))["text"])
    assert snapshot["t"] == "snapshot"
    assert snapshot["g"] == started.generation.pk
    await listener.until("done", within=30)
    await asyncio.wait_for(task, 30)
    later = [d for d in listener.deltas() if d["seq"] > snapshot["seq"]]
    message = await Message.objects.aget(pk=started.assistant.pk)
    assert snapshot["content"] + joined(later, "content") == message.content


async def test_partial_text_is_flushed_while_streaming(alice: Any, settings: Any) -> None:
    settings.CHAT_FLUSH_INTERVAL = 0.2
    started = await start_turn(alice, "otters", "emulator/long?tokens_per_second=100")
    task = worker.start(started.job)

    async def flushed_beyond(content: str) -> Generation | None:
        """The row once a flush wrote more text than `content`."""
        row = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
        return row if len(row.message.content) > len(content) else None

    # The first output is written at once; later flushes follow every 0.2 s while it streams.
    first = await eventually(lambda: flushed_beyond(""), what="the first flush")
    later = await eventually(lambda: flushed_beyond(first.message.content), what="a later flush")
    for generation in (first, later):
        assert generation.status == "streaming"
        assert generation.heartbeat_at is not None
        assert generation.last_seq > 0
    assert later.message.content.startswith(first.message.content)
    assert later.last_seq > first.last_seq
    assert later.heartbeat_at > first.heartbeat_at
    flushed = later.message.content
    # Cancel once more has been sent than the last flush wrote, so the final write must add it.
    running = worker._running[started.job.generation_pk]
    await eventually(
        lambda: len(running.state.content) > len(flushed) or None, what="text past the flush"
    )
    await get_channel_layer().send(
        started.job.owner_channel, socket_messages.cancel(started.job.generation_pk)
    )
    await asyncio.wait_for(task, 30)
    final = await Message.objects.aget(pk=started.assistant.pk)
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


# --- Answer settings reach the upstream request (request_options.py) -----------------------------

FRENCH = RequestOptions("Answer in French.", 0.7, 2048, "high")


async def _run_job(job: Job, *, early: worker.EarlyStream | None = None) -> Generation:
    task = worker.start(job, early=early)
    await asyncio.wait_for(task, 30)
    return await Generation.objects.select_related("message").aget(pk=job.generation_pk)


async def test_numes_receives_the_system_prompt_temperature_budget_and_effort(
    alice: Any, upstream: UpstreamLog
) -> None:
    started = await start_turn(alice, "Why is the sea salty?", "emulator/echo")
    generation = await _run_job(dataclasses.replace(started.job, options=FRENCH))
    assert generation.status == "completed"
    record = await upstream.one(dialect="numes", scenario="echo")
    assert record.system == "Answer in French."
    assert record.temperature == 0.7
    assert record.max_tokens == 2048
    assert record.reasoning == {"effort": "high"}
    assert generation.message.content == "Why is the sea salty?", "the question is still last"


async def test_osmexo_receives_the_settings_without_a_reasoning_control(
    alice: Any, upstream: UpstreamLog, emulator_url: str
) -> None:
    row = await Gateway.objects.acreate(
        name="Osmexo",
        base_url=f"{emulator_url}/osmexo/v1",
        dialect="osmexo",
        cost_unit="micro_usd",
        api_key_encrypted=await sync_to_async(key_vault.encrypt)("osmexo-key"),
    )
    configs.forget_configs()
    started = await start_turn(alice, "Why is the sea salty?", "emulator/echo")
    config = await configs.aconfig_for(row.pk)
    job = dataclasses.replace(started.job, gateway=config, options=FRENCH, max_tokens=4096)
    assert (await _run_job(job)).status == "completed"
    record = await upstream.one(dialect="osmexo")
    assert (record.system, record.temperature, record.reasoning) == ("Answer in French.", 0.7, None)
    assert record.max_tokens == 4096, "a generation's own budget overrides the conversation's"


async def test_a_job_without_options_sends_none(alice: Any, upstream: UpstreamLog) -> None:
    started = await start_turn(alice, "hello", "emulator/echo")
    await _run_job(started.job)
    record = await upstream.one(scenario="echo")
    assert (record.system, record.temperature, record.max_tokens, record.reasoning) == (
        None,
        None,
        None,
        None,
    )


async def test_an_early_request_carries_the_options(alice: Any, upstream: UpstreamLog) -> None:
    config = await configs.aconfig_for(None)
    messages = [{"role": "user", "content": "hello early"}]
    early = worker.open_early(config, "emulator/echo", messages, options=FRENCH)
    record = await upstream.one(scenario="echo")
    started = await start_turn(alice, "hello early", "emulator/echo")
    generation = await _run_job(dataclasses.replace(started.job, options=FRENCH), early=early)
    assert generation.message.content == "hello early"
    assert (record.system, record.temperature, record.max_tokens, record.reasoning) == (
        "Answer in French.",
        0.7,
        2048,
        {"effort": "high"},
    )
    assert upstream.new(scenario="echo") == [record], "the worker read the early request"


async def test_the_end_of_the_text_is_shown_before_the_final_render_is_ready(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last delta waits for the render pool (the last settled blocks, the final render);
    the text that arrived before the stream ended does not. A short answer arrives whole before
    the first tick, so without this it was shown only once its render was done (seconds, with
    the render processes starved of CPU)."""
    from chatapp.rendering import answer_html

    release = asyncio.Event()
    render_answer = answer_html.render_answer

    async def held(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await render_answer(*args, **kwargs)

    monkeypatch.setattr(answer_html, "render_answer", held)
    text = "A short answer, whole before the first tick."
    started = await start_turn(alice, text, "emulator/echo?tokens_per_second=2000&ttft_ms=5")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    while joined(listener.deltas(), "content") != text:
        await asyncio.wait_for(listener.next(), 10)
    assert not task.done(), "the final render is still held"
    assert all(message["t"] != "done" for message in listener.received)
    # A page that joins now (its socket watched after the send) gets the text by snapshot.
    layer = get_channel_layer()
    reply = await layer.new_channel()
    await layer.send(
        started.job.owner_channel,
        socket_messages.snapshot_request(started.job.generation_pk, reply),
    )
    snapshot = orjson.loads((await asyncio.wait_for(layer.receive(reply), 10))["text"])
    assert snapshot["content"] == text
    release.set()
    await listener.until("done")
    await asyncio.wait_for(task, 30)


async def test_a_delta_reaches_the_sockets_queues_without_a_pass_of_the_loop(alice: Any) -> None:
    """In process, a worker's delta is on every watching socket's queue when its send returns,
    with nothing else run meanwhile: the ticker sends all streams' deltas in one pass of the loop
    (a task and a pass each made a tick at 200 streams wait behind everything else 200 times)."""
    from chatapp.streaming.ticker import ticker

    started = await start_turn(alice, "hello", "emulator/echo")
    running = worker.GenerationWorker(started.job, await ticker())
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(socket_messages.group_name(started.conversation.pk), channel)
    running.state.apply(TextDelta("hi"))
    ran: list[bool] = []
    asyncio.get_running_loop().call_soon(ran.append, True)
    await running.send_delta()
    assert ran == [], "the send let the loop run something else"
    message = layer.channels[channel].get_nowait()[1]
    assert orjson.loads(message["text"]) == [started.job.generation_pk, 1, "hi"]


async def test_a_snapshot_asked_after_the_end_while_the_cost_settles_is_answered_by_done(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket that joins after `done` was sent, while the worker still settles the cost, learns
    of the end: from memory it would otherwise get a snapshot and wait for a `done` long gone."""
    settling = asyncio.Event()
    release = asyncio.Event()

    async def held(*_: Any, **__: Any) -> None:
        settling.set()
        await release.wait()

    monkeypatch.setattr(worker.settling, "settle", held)
    started = await start_turn(alice, "hello", "emulator/echo")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    done = await listener.until("done")
    await asyncio.wait_for(settling.wait(), 10)
    running = worker.running_here(started.job.generation_pk, alice.pk)
    assert running is not None  # still settling: the case at hand
    layer = get_channel_layer()
    reply = await layer.new_channel()
    await running.send_snapshot(reply)
    answer = orjson.loads((await asyncio.wait_for(layer.receive(reply), 5))["text"])
    assert answer == done
    release.set()
    await asyncio.wait_for(task, 10)


async def test_a_burst_goes_to_browsers_in_bounded_frames_without_losing_a_byte(
    alice: Any, settings: Any
) -> None:
    """A gateway's burst (here: the whole answer before the first tick) goes out as deltas of at
    most `MAX_FRAME_TEXT` characters each, numbered one after another, whose text joins up to
    exactly what arrived (#45: one huge delta went out whole)."""
    settings.CHAT_DELTA_INTERVAL = 1.0  # the answer arrives whole between two ticks
    # Tens of thousands of characters at once: the suite's 1 s idle deadline cut it short on a
    # loaded machine (seen once on PostgreSQL), which is not what this test is about.
    settings.LLM_TIMEOUTS = {"idle": 30.0, "first_token": 30.0}
    text = "\n".join(f"word {n} 😀 ünïcode" for n in range(3000))
    started = await start_turn(alice, text, "emulator/echo?tokens_per_second=200000&ttft_ms=5")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done", within=60)
    await asyncio.wait_for(task, 30)
    deltas = listener.deltas()
    sizes = [len(d.get("content", "")) + len(d.get("reasoning", "")) for d in deltas]
    assert max(sizes) == socket_messages.MAX_FRAME_TEXT, "a burst was split at the bound"
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    assert joined(deltas, "content") == text
    done = [m for m in listener.received if m["t"] == "done"]
    assert done[0]["seq"] == deltas[-1]["seq"]
    message = await Message.objects.aget(generation__pk=started.generation.pk)
    assert message.content == text


async def test_one_huge_paragraph_goes_to_browsers_in_bounded_frames(
    alice: Any, settings: Any
) -> None:
    """A 95,000-character paragraph (a message holds at most 100,000) goes out in no frame
    longer than the bound: its text as bounded deltas, and the final render draws it (#45
    point 5: its settled HTML went out as one 303,046-character frame); the blocks after it are
    not settled live either (none settles before the one it follows); no byte is lost."""
    settings.CHAT_DELTA_INTERVAL = 1.0  # the paragraph arrives whole between two ticks
    settings.LLM_TIMEOUTS = {"idle": 30.0, "first_token": 30.0}  # as in the burst's test
    huge = "word " * 19_000
    text = f"{huge.strip()}\n\nA *short* paragraph after it.\n\nAnd the last."
    started = await start_turn(alice, text, "emulator/echo?tokens_per_second=500000&ttft_ms=5")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done", within=60)
    await asyncio.wait_for(task, 30)
    assert max(listener.frame_sizes) <= 2 * socket_messages.MAX_FRAME_TEXT
    deltas = listener.deltas()
    assert joined(deltas, "content") == text
    settled = [d["settled"] for d in deltas if "settled" in d]
    assert settled == [], "nothing settled live: the paragraph is first"
    message = await Message.objects.aget(generation__pk=started.generation.pk)
    assert message.content == text
    assert "<em>short</em>" in message.html
    assert message.html.count("word") == 19_000
