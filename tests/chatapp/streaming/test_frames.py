"""Deltas coalesced into one frame per conversation per tick (`chatapp.streaming.frames`), counted
on a simulated clock through the real ticker and layer, then end to end through a socket."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatapp.conversations.comparison import create_comparison
from chatapp.conversations.models import Message
from chatapp.conversations.turns import Answerer
from chatapp.messaging import socket_messages
from chatapp.streaming import frames, worker
from chatapp.streaming.live_state import LiveState
from chatapp.streaming.ticker import Ticker
from chatapp.ws import page_model
from gateway_client.events import TextDelta
from tests.chatapp.ws.test_consumers import connect, socket
from tests.waiting import eventually

TICK = 0.05  # CHAT_DELTA_INTERVAL
TOKENS = 500
TOKENS_PER_SECOND = 50  # `benchmarks load`'s pace: 500 tokens in 10 s, 200 ticks
# One frame a tick at most would be 200; text is held until it is worth a frame
# (`live_state.MIN_DELTA_TEXT`), so 4-character tokens at this pace go every other tick.
MAX_FRAMES = 105


class FakeWorker:
    """What the ticker asks of a worker (`ticker.TickedWorker`), over a real `LiveState`."""

    def __init__(self, generation_pk: int, conversation_pk: int) -> None:
        self.job = SimpleNamespace(generation_pk=generation_pk)
        self.state = LiveState()
        self.flushed_seq = 0
        self.group = socket_messages.group_name(conversation_pk)
        self.sending = asyncio.Lock()

    def cancel(self) -> None:
        raise AssertionError("not cancelled here")

    def check_spend(self) -> None:
        pass

    def take_delta(self) -> list[list[object]]:
        delta = self.state.take_delta()
        return [] if delta is None else socket_messages.delta_frames(self.job.generation_pk, delta)


def token(i: int) -> str:
    return f"{i % 1000:03d} "  # four characters, no newline (no block settles, no render pool)


async def stream(
    workers: list[FakeWorker], channel: str, *others: str
) -> tuple[list[str], str, list[list[str]]]:
    """Every worker's answer, `TOKENS` tokens at `TOKENS_PER_SECOND` on a simulated clock, ticked
    every `TICK`; the frames the socket's `channel` received (and the `others`), and the text."""
    layer = get_channel_layer()
    received: list[list[str]] = [[] for _ in (channel, *others)]
    ticker = Ticker("unused", layer)
    for fake in workers:
        ticker.workers[fake.job.generation_pk] = fake  # type: ignore[assignment]
    text = "".join(token(i) for i in range(TOKENS))
    sent = 0
    for tick in itertools.count(1):
        now = tick * TICK
        due = min(TOKENS, int(now * TOKENS_PER_SECOND))
        for i in range(sent, due):
            for fake in workers:
                fake.state.apply(TextDelta(token(i)), now)
        sent = due
        await ticker.send_deltas(now + TICK)  # a whole tick later: whatever waits is old enough
        for name, frames_of in zip((channel, *others), received, strict=True):
            while not layer.channels[name].empty():  # read as a socket does, within its capacity
                frames_of.append(layer.channels[name].get_nowait()[1]["text"])
        if sent == TOKENS and not any(fake.state.pending for fake in workers):
            break
    return received[0], text, received[1:]


def assemble(frames_text: list[str], generation_pk: int) -> page_model.StreamState:
    """The answer `generation_pk` as the page builds it from the frames (`stream_state.js`)."""
    state = page_model.start(generation_pk)
    for text in frames_text:
        for message in page_model.messages_from_wire(orjson.loads(text)):
            if message["g"] == generation_pk:
                state = page_model.receive(state, message, 0).state
    return state


async def test_a_500_token_answer_reaches_a_socket_in_few_frames_every_byte_once_in_order() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(socket_messages.group_name(1), channel)
    received, text, _ = await stream([FakeWorker(11, 1)], channel)
    assert len(received) <= MAX_FRAMES
    shown = assemble(received, 11)
    assert shown.content == text
    assert not shown.held, "no gap"
    assert shown.seq == len(received), "one delta a frame, numbered without a gap or a repeat"


async def test_the_answers_of_one_conversation_share_each_ticks_frame() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(socket_messages.group_name(2), channel)
    elsewhere = await layer.new_channel()
    await layer.group_add(socket_messages.group_name(3), elsewhere)
    answers = [FakeWorker(21, 2), FakeWorker(22, 2), FakeWorker(23, 2)]
    received, text, (other,) = await stream([*answers, FakeWorker(31, 3)], channel, elsewhere)
    assert len(received) <= MAX_FRAMES, "three answers, the frames of one"
    for fake in answers:
        shown = assemble(received, fake.job.generation_pk)
        assert (shown.content, shown.held) == (text, {})
    shapes = {type(orjson.loads(text)[0]) for text in received}
    assert shapes == {list}, "every frame carries the three deltas of its tick"
    assert assemble(other, 31).content == text, "the other conversation's socket gets its own"
    assert all(isinstance(orjson.loads(text)[0], int) for text in other)


def test_one_delta_is_a_bare_frame_and_several_a_list_of_them() -> None:
    tick = frames.TickFrames()
    tick.add("conversation.1", [1, 1, "a"])
    tick.add("conversation.2", [2, 5, "b"])
    tick.add("conversation.1", [3, 1, "c", "", {"draft": None}])
    assert [(group, orjson.loads(m["text"])) for group, m in tick.messages()] == [
        ("conversation.1", [[1, 1, "a"], [3, 1, "c", "", {"draft": None}]]),
        ("conversation.2", [2, 5, "b"]),
    ]
    both = tick.messages()[0][1]["text"]
    assert socket_messages.decode_frame(both) == [
        {"t": "delta", "g": 1, "seq": 1, "content": "a"},
        {"t": "delta", "g": 3, "seq": 1, "content": "c", "draft": None},
    ]
    assert page_model.messages_from_wire(orjson.loads(both)) == socket_messages.decode_frame(both)
    done = orjson.dumps(socket_messages.done(1, 2, "completed")).decode()  # type: ignore[arg-type]
    assert socket_messages.decode_frame(done) == [socket_messages.decode(done)]


def test_the_html_of_settled_chunks_counts_toward_a_frames_bound() -> None:
    """Two answers' deltas whose settled HTML together outgrows the bound go in two frames (#45
    point 5: a comparison's settled blocks would otherwise share one frame of any size)."""
    html = "x" * (socket_messages.MAX_FRAME_TEXT * 3 // 4)
    tick = frames.TickFrames()
    tick.add("conversation.1", [1, 4, "a", "", {"settled": [0, 9, html]}])
    tick.add("conversation.1", [2, 6, "b", "", {"settled": [0, 9, html]}])
    sizes = [len(message["text"]) for _, message in tick.messages()]
    assert len(sizes) == 2
    assert max(sizes) < socket_messages.MAX_FRAME_TEXT


@pytest.mark.django_db(transaction=True)
async def test_a_socket_joining_two_answers_mid_stream_gets_each_whole_once(alice: Any) -> None:
    model = "emulator/long?tokens_per_second=200&long_tokens=400"
    owner = await worker.owner_channel()
    answerers = [Answerer(model=model), Answerer(model=model)]
    first, second = await sync_to_async(create_comparison)(
        alice, None, "Otters or beavers?", answerers, owner
    )
    tasks = [worker.start(first.job), worker.start(second.job)]
    running = [worker._running[s.job.generation_pk] for s in (first, second)]
    await eventually(lambda: all(r.state.seq > 2 for r in running), what="both under way")
    ws = await socket(first.conversation.pk, alice)
    assert (await connect(ws))[0]
    # The page as rendered before the socket watched: its watch stands for the snapshot asks.
    states = {
        s.generation.pk: page_model.watch_sent(page_model.start(s.generation.pk), 0).state
        for s in (first, second)
    }
    shared = 0
    while not all(state.done for state in states.values()):
        parsed = orjson.loads(await ws.receive_from(timeout=30))  # a cold render pool is slow
        messages = page_model.messages_from_wire(parsed)
        shared += len({m.get("g") for m in messages}) > 1
        for message in messages:
            if message.get("g") not in states:  # the user's spend, a title
                continue
            step = page_model.receive(states[message["g"]], message, 0)
            sends = [e for e in step.effects if isinstance(e, page_model.Send)]
            assert not sends, f"a gap in {message['g']} at {message.get('seq')}: {sends}"
            states[message["g"]] = step.state
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    for started in (first, second):
        stored = await Message.objects.aget(pk=started.assistant.pk)
        assert states[started.generation.pk].content == stored.content
    assert shared > 0, "the two answers' deltas came in shared frames"
    await ws.disconnect()


def test_a_ticks_frames_hold_at_most_a_frames_text_in_order() -> None:
    """Two answers of one conversation whose tick took more text than a frame holds (a gateway's
    huge chunk, in `delta_frames`' parts) go as several frames: none over `MAX_FRAME_TEXT`
    characters of text, every part once, in the order taken."""
    limit = socket_messages.MAX_FRAME_TEXT
    tick = frames.TickFrames()
    first = socket_messages.delta_frames(1, {"seq": 3, "content": "a" * (limit * 2 + 10)})
    second = socket_messages.delta_frames(2, {"seq": 1, "content": "b" * 100})
    for delta in [*first, *second]:
        tick.add("conversation-1", delta)
    sent: list[list[object]] = []
    for group, message in tick.messages():
        assert group == "conversation-1"
        payload = orjson.loads(message["text"])
        deltas = payload if isinstance(payload[0], list) else [payload]
        assert sum(len(d[2]) for d in deltas) <= limit
        sent.extend(deltas)
    assert sent == [*first, *second]
    assert [d[1] for d in sent] == [1, 2, 3, 1]
