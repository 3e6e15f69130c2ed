"""Streaming, Stop, re-attach and a crash across server processes sharing Redis and PostgreSQL.

A generation runs in the process that received the POST (A, or the victim that is killed); it is
watched, stopped and re-joined through B, as a browser whose websocket or request lands there.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from channels_redis.core import RedisChannelLayer

from gateway_client.emulator import EmulatorURL

from .servers import Server, Socket, User

pytestmark = pytest.mark.multiprocess

FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
SHORT = "emulator/long?tokens_per_second=300&long_tokens=300"
MEDIUM = "emulator/long?tokens_per_second=150&long_tokens=450"
ENDLESS = "emulator/long?tokens_per_second=40"

MAX_LEAD = 10  # deltas one socket may have received that the other has not, at any moment


async def conversation(user: User, server: Server) -> int:
    """A conversation with one finished turn, so a socket can join before the next one starts."""
    conversation_id = await user.new_conversation(server, "Hello there", FAST)
    await user.wait_idle(conversation_id)
    return conversation_id


async def test_a_generation_on_a_streams_to_a_socket_on_b(
    user: User, server_a: Server, server_b: Server
) -> None:
    conversation_id = await conversation(user, server_a)
    async with user.socket(server_b, conversation_id) as socket:
        generation_pk = await user.send(server_a, conversation_id, "Tell me of otters", SHORT)
        stream = await socket.follow(generation_pk, within=20)
    row = await user.generation(generation_pk)
    assert row["status"] == "completed"
    assert stream.done == {
        "t": "done",
        "g": generation_pk,
        "seq": row["last_seq"],
        "status": "completed",
    }
    assert len(stream.deltas) >= 5
    assert [d["seq"] for d in stream.deltas] == list(range(1, row["last_seq"] + 1))
    assert stream.snapshots == []
    assert stream.content == row["content"]
    assert len(row["content"]) > 500


async def test_sockets_on_both_processes_stream_the_same_answer_in_step(
    user: User, server_a: Server, server_b: Server
) -> None:
    """The worker and a consumer share A's channel layer, whose process-local channels are
    read through one Redis list per prefix: neither may hold up the other's messages."""
    conversation_id = await conversation(user, server_a)
    async with (
        user.socket(server_a, conversation_id) as on_a,
        user.socket(server_b, conversation_id) as on_b,
    ):
        generation_pk = await user.send(server_a, conversation_id, "Tell me of seals", MEDIUM)
        stream_a, stream_b = await asyncio.gather(
            on_a.follow(generation_pk, within=20), on_b.follow(generation_pk, within=20)
        )
    row = await user.generation(generation_pk)
    for stream in (stream_a, stream_b):
        assert stream.applied == list(range(1, row["last_seq"] + 1))
        assert stream.content == row["content"]
    # Counted in deltas, not seconds: a loaded machine slows both sockets and the stream alike.
    lead = max(_lead(stream_a.arrived, stream_b.arrived), _lead(stream_b.arrived, stream_a.arrived))
    print(f"sockets on A and B: one at most {lead} deltas ahead of the other")
    assert lead <= MAX_LEAD, f"one socket was {lead} deltas ahead of the other"


def _lead(ahead: dict[int, float], behind: dict[int, float]) -> int:
    """How many more deltas `ahead` had received than `behind`, at most, at the moments `ahead`
    received one (each maps seq to arrival time)."""
    return max(
        sum(at <= moment for at in ahead.values()) - sum(at <= moment for at in behind.values())
        for moment in ahead.values()
    )


async def _stop(via: str, user: User, server: Server, socket: Socket, generation_pk: int) -> float:
    """Press Stop as the page does (`hx-post`), or over the socket; when it was pressed."""
    async with user.http(server) as http:  # opened first: its setup is not the app's latency
        pressed_at = time.time()
        if via == "http":
            response = await http.post(f"/g/{generation_pk}/stop/")
            assert response.status_code == 204
        else:
            await socket.send({"t": "stop", "g": generation_pk})
    return pressed_at


@pytest.mark.parametrize("via", ["http", "websocket"])
async def test_stop_through_b_cancels_the_worker_in_a(
    via: str, user: User, server_a: Server, server_b: Server, paced_emulator: EmulatorURL
) -> None:
    conversation_id = await conversation(user, server_a)
    page = await user.get(server_b, f"/c/{conversation_id}/")  # the page Stop is pressed on
    assert page.status_code == 200
    async with user.socket(server_b, conversation_id) as socket:
        generation_pk = await user.send(server_a, conversation_id, "A long story", ENDLESS)
        await socket.follow(generation_pk, until="delta", within=10)
        stopped_at = await _stop(via, user, server_b, socket, generation_pk)
        stream = await socket.follow(generation_pk, within=5)
    row = await user.generation(generation_pk)
    records = paced_emulator.app.records
    record = await asyncio.to_thread(records.wait_finished, row["upstream_id"], timeout=5)
    # Cancelled upstream after the Stop (the answer would have run over a minute longer).
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    print(f"stop via B ({via}): upstream closed after {record.cancelled_at - stopped_at:.3f} s")
    assert stopped_at < record.cancelled_at
    assert row["status"] == "cancelled"
    assert stream.done is not None
    assert stream.done["status"] == "cancelled"
    assert not stream.gaps
    assert not stream.duplicates
    assert row["content"]
    assert row["content"] == stream.content


async def test_stop_and_an_idle_socket_outlast_the_layers_blocking_reads(
    user: User, server_a: Server, server_b: Server, paced_emulator: EmulatorURL
) -> None:
    """channels_redis waits for messages with blocking pops of `brpop_timeout` (5 s): a worker
    that heard nothing for longer must still hear Stop, and an idle socket must stay open."""
    quiet_id = await conversation(user, server_b)
    finished = await user.latest_generation(quiet_id)
    conversation_id = await conversation(user, server_a)
    async with (
        user.socket(server_b, quiet_id) as quiet,
        user.socket(server_b, conversation_id) as socket,
    ):
        generation_pk = await user.send(server_a, conversation_id, "A long story", ENDLESS)
        await socket.follow(generation_pk, until="delta", within=10)
        await asyncio.sleep(RedisChannelLayer.brpop_timeout + 1)
        stopped_at = await _stop("http", user, server_b, socket, generation_pk)
        stream = await socket.follow(generation_pk, within=5)
        await quiet.send({"t": "snapshot", "g": finished})
        reply = await quiet.next(within=5)
    assert stream.done is not None
    assert stream.done["status"] == "cancelled"
    record = paced_emulator.app.records.get((await user.generation(generation_pk))["upstream_id"])
    assert record is not None
    assert record.cancelled_at is not None
    assert stopped_at < record.cancelled_at
    assert reply["t"] == "done"
    assert reply["g"] == finished


async def test_a_socket_joining_b_mid_stream_gets_a_snapshot_then_the_rest(
    user: User, server_a: Server, server_b: Server
) -> None:
    conversation_id = await conversation(user, server_a)
    generation_pk = await user.send(server_a, conversation_id, "Explain the tides", MEDIUM)
    await user.wait_generation(generation_pk, within=10, until=lambda row: row["last_seq"] > 0)
    page = await user.get(server_b, f"/c/{conversation_id}/")  # a reload that lands on B
    assert f'data-generation="{generation_pk}" data-status="streaming"' in page.text
    async with user.socket(server_b, conversation_id) as socket:
        stream = await socket.follow(generation_pk, joined_mid_stream=True, within=20)
    row = await user.generation(generation_pk)
    assert row["status"] == "completed"
    snapshot = stream.snapshots[0]
    assert snapshot["seq"] > 0
    assert snapshot["content"]
    assert stream.applied, "no delta after the snapshot: the answer was over before the socket"
    assert stream.applied == list(range(snapshot["seq"] + 1, row["last_seq"] + 1))
    assert not stream.gaps
    assert stream.content == row["content"]


@pytest.mark.parametrize("reload", ["at once", "after the sweep"])
async def test_killing_the_worker_process_leaves_the_sweep_in_b_to_interrupt_it(
    reload: str, user: User, victim: Server, server_b: Server, paced_emulator: EmulatorURL
) -> None:
    """A page reloaded on B as the worker dies gets the sweep's `done` whether its watch came
    before the sweep (the socket asks the dead worker for a snapshot in vain, then hears the
    sweep) or after it (its check after the watch asks B, which answers from the database): on
    a busy machine a reload "at once" may well come after the sweep, 4 s after the last beat."""
    conversation_id = await conversation(user, victim)
    async with user.socket(server_b, conversation_id) as socket:
        generation_pk = await user.send(victim, conversation_id, "A long story", ENDLESS)
        flushed = await user.wait_generation(
            generation_pk, within=10, until=lambda row: len(row["content"]) > 0
        )
        victim.kill()
        killed_at = time.monotonic()
        if reload == "after the sweep":
            stream = await socket.follow(generation_pk, within=15)
            swept_after = time.monotonic() - killed_at
        async with user.socket(server_b, conversation_id) as reloaded:
            if reload == "at once":
                stream = await socket.follow(generation_pk, within=15)
                swept_after = time.monotonic() - killed_at
            after_reload = await reloaded.follow(generation_pk, joined_mid_stream=True, within=5)
    print(f"killed worker: interrupted by B's sweep after {swept_after:.1f} s")
    row = await user.generation(generation_pk)
    assert row["status"] == "interrupted"
    assert stream.done == {
        "t": "done",
        "g": generation_pk,
        "seq": row["last_seq"],
        "status": "interrupted",
    }
    assert after_reload.done == stream.done
    assert row["content"].startswith(flushed["content"])
    assert stream.content.startswith(row["content"])
    assert f"Generation {generation_pk} interrupted" in server_b.log_text()
    records = paced_emulator.app.records
    record = await asyncio.to_thread(records.wait_finished, row["upstream_id"], timeout=5)
    assert record.cancelled_at is not None  # the dead process's connection was closed


async def test_sockets_negotiate_permessage_deflate_with_a_small_window(
    user: User, server_a: Server
) -> None:
    conversation_id = await conversation(user, server_a)
    async with user.socket(server_a, conversation_id) as socket:
        response = socket.connection.response
        assert response is not None
        extensions = response.headers["Sec-WebSocket-Extensions"]
        assert "permessage-deflate" in extensions
        # The server's own window needs no word: a smaller one is always readable.
        assert "client_max_window_bits=12" in extensions
        # What arrives through the compressed socket is the answer, whole.
        generation_pk = await user.send(server_a, conversation_id, "Tell me of otters", SHORT)
        stream = await socket.follow(generation_pk, within=20)
    row = await user.generation(generation_pk)
    assert stream.content == row["content"]
