"""The page's websocket, driven through the real ASGI stack (origin check, session auth)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from chatapp.asgi import application
from chatapp.conversations.models import Message
from chatapp.costs.models import Generation
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from chatapp.ws.consumer import CLOSE_UNAUTHENTICATED
from tests.chatapp.conftest import start_turn
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]


def session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def communicator(user: Any | None, cookie: str | None = None) -> WebsocketCommunicator:
    # The page's own origin (the socket's exact-origin check compares it with the Host).
    headers = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]
    if cookie is not None:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    return WebsocketCommunicator(application, "/ws/chat/", headers)


async def socket(conversation_pk: int, user: Any | None) -> WebsocketCommunicator:
    """A page's socket that will watch `conversation_pk` once connected (see `connect`)."""
    cookie = None if user is None else await sync_to_async(session_cookie)(user)
    ws = communicator(user, cookie)
    ws.watching = conversation_pk  # type: ignore[attr-defined]
    return ws


async def connect(ws: WebsocketCommunicator, *, owned: bool = True) -> tuple[bool, int | None]:
    """Connect, then watch the conversation, as the page does right after its socket opens; for
    an `owned` conversation, until the server says the socket watches it."""
    connected, code = await ws.connect()
    if connected:
        conversation = ws.watching  # type: ignore[attr-defined]
        await ws.send_to(text_data=orjson.dumps({"t": "watch", "c": conversation}).decode())
        if owned:
            assert await receive(ws) == {"t": "watching", "c": conversation}
    return connected, code


async def receive(ws: WebsocketCommunicator) -> dict[str, Any]:
    return socket_messages.decode(await ws.receive_from(timeout=10))


async def collect_until_done(ws: WebsocketCommunicator) -> list[dict[str, Any]]:
    received = []
    while True:
        message = await receive(ws)
        received.append(message)
        if message["t"] == "done":
            return received


def rebuild(messages: list[dict[str, Any]]) -> str:
    """What a browser shows: snapshots replace, later deltas append, old ones are dropped."""
    text, seq = "", 0
    for message in messages:
        if message["t"] == "snapshot" and message["seq"] >= seq:
            text, seq = message["content"], message["seq"]
        elif message["t"] == "delta" and message["seq"] == seq + 1:
            text, seq = text + message.get("content", ""), message["seq"]
        elif message["t"] == "delta" and message["seq"] > seq + 1:
            raise AssertionError(f"gap at {seq} -> {message['seq']}")
    return text


async def test_anonymous_socket_is_refused() -> None:
    ws = communicator(None)
    connected, code = await ws.connect()
    assert not connected
    assert code == CLOSE_UNAUTHENTICATED


async def test_another_users_conversation_is_refused(alice: Any, bob: Any) -> None:
    started = await start_turn(alice, "hi", "emulator/long?tokens_per_second=200")
    task = worker.start(started.job)
    ws = await socket(started.conversation.pk, bob)
    connected, _ = await connect(ws, owned=False)
    assert connected  # bob's own socket; watching alice's conversation is what is refused
    assert await receive(ws) == {"t": "gone", "c": started.conversation.pk}
    assert await ws.receive_nothing(timeout=0.3)  # none of alice's deltas reach bob
    await get_channel_layer().send(
        started.job.owner_channel, socket_messages.cancel(started.job.generation_pk)
    )
    await asyncio.wait_for(task, 10)
    await ws.disconnect()


async def test_foreign_origin_is_refused(alice: Any) -> None:
    cookie = await sync_to_async(session_cookie)(alice)
    ws = WebsocketCommunicator(
        application,
        "/ws/chat/",
        [(b"origin", b"http://evil.example"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, _ = await ws.connect()
    assert not connected


async def test_joining_mid_stream_gets_a_snapshot_then_deltas_without_gap(alice: Any) -> None:
    started = await start_turn(
        alice, "otters", "emulator/long?tokens_per_second=400&long_tokens=500"
    )
    task = worker.start(started.job)
    running = worker._running[started.job.generation_pk]
    # Some text has been sent before this socket exists.
    await eventually(lambda: running.state.seq > 2, what="a few deltas sent")
    ws = await socket(started.conversation.pk, alice)
    connected, _ = await connect(ws)
    assert connected
    received = await collect_until_done(ws)
    await asyncio.wait_for(task, 30)
    # A tick may reach the group while the worker is still answering the snapshot request; the
    # snapshot covers such deltas (a browser holds them back, then drops them as duplicates).
    first = next(i for i, m in enumerate(received) if m["t"] == "snapshot")
    snapshot = received[first]
    assert all(m["t"] == "delta" and m["seq"] <= snapshot["seq"] for m in received[:first])
    assert snapshot["seq"] > 0
    assert snapshot["content"]
    message = await Message.objects.aget(pk=started.assistant.pk)
    assert rebuild(received[first:]) == message.content
    assert received[-1]["status"] == "completed"
    await ws.disconnect()


async def test_two_sockets_both_stream(alice: Any) -> None:
    started = await start_turn(
        alice, "otters", "emulator/long?tokens_per_second=400&long_tokens=300"
    )
    first = await socket(started.conversation.pk, alice)
    second = await socket(started.conversation.pk, alice)
    assert (await connect(first))[0]
    assert (await connect(second))[0]
    task = worker.start(started.job)
    one, two = await asyncio.gather(collect_until_done(first), collect_until_done(second))
    await asyncio.wait_for(task, 30)
    message = await Message.objects.aget(pk=started.assistant.pk)
    assert rebuild(one) == rebuild(two) == message.content
    await first.disconnect()
    await second.disconnect()


async def test_closing_every_socket_does_not_stop_the_generation(alice: Any) -> None:
    started = await start_turn(
        alice, "otters", "emulator/long?tokens_per_second=400&long_tokens=300"
    )
    ws = await socket(started.conversation.pk, alice)
    assert (await connect(ws))[0]
    task = worker.start(started.job)
    await receive(ws)
    await ws.disconnect()
    await asyncio.wait_for(task, 30)
    generation = await Generation.objects.aget(pk=started.generation.pk)
    assert generation.status == "completed"


async def test_stop_from_the_socket_cancels(alice: Any) -> None:
    started = await start_turn(alice, "otters", "emulator/long?tokens_per_second=200")
    ws = await socket(started.conversation.pk, alice)
    assert (await connect(ws))[0]
    task = worker.start(started.job)
    first = await receive(ws)
    await ws.send_to(text_data=orjson.dumps({"t": "stop", "g": first["g"]}).decode())
    received = await collect_until_done(ws)
    assert received[-1]["status"] == "cancelled"
    await asyncio.wait_for(task, 30)
    await ws.disconnect()


async def test_snapshot_request_after_the_end_answers_done(alice: Any) -> None:
    started = await start_turn(alice, "hello", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    ws = await socket(started.conversation.pk, alice)
    assert (await connect(ws))[0]
    assert await ws.receive_nothing(timeout=0.2)  # nothing running: no snapshot
    await ws.send_to(text_data=orjson.dumps({"t": "snapshot", "g": started.generation.pk}).decode())
    done = await receive(ws)
    assert done["t"] == "done"
    assert done["status"] == "completed"
    await ws.disconnect()


async def test_malformed_and_foreign_requests_are_refused(alice: Any, bob: Any) -> None:
    mine = await start_turn(alice, "hello", "emulator/echo")
    theirs = await start_turn(bob, "secret", "emulator/long?tokens_per_second=100")
    task = worker.start(theirs.job)
    ws = await socket(mine.conversation.pk, alice)
    assert (await connect(ws))[0]
    await ws.send_to(text_data="not json")
    assert await receive(ws) == {"t": "error", "error": "The message is not valid JSON."}
    await ws.send_to(text_data='{"t": "stop"}')
    assert await receive(ws) == {"t": "error", "error": "`g` must be a positive integer ID."}
    # Another user's generation cannot be stopped or read through this socket: it is answered
    # as one that does not exist.
    gone = {"t": "gone", "g": theirs.generation.pk}
    await ws.send_to(text_data=orjson.dumps({"t": "stop", "g": theirs.generation.pk}).decode())
    assert await receive(ws) == gone
    await ws.send_to(text_data=orjson.dumps({"t": "snapshot", "g": theirs.generation.pk}).decode())
    assert await receive(ws) == gone
    assert await ws.receive_nothing(timeout=0.3)
    generation = await Generation.objects.aget(pk=theirs.generation.pk)
    assert generation.status == "streaming"
    await ws.disconnect()
    await get_channel_layer().send(
        theirs.job.owner_channel, socket_messages.cancel(theirs.job.generation_pk)
    )
    await asyncio.wait_for(task, 10)


async def test_a_snapshot_asked_of_an_answer_running_here_comes_even_when_channels_are_full(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a crowd's peak a tab's channel fills. The snapshots it gets as it watches and asks must
    still come, and the socket must live: sent through the layer to its own channel, ChannelFull
    closed the socket and its tab reconnected into the same storm."""
    started = await start_turn(
        alice, "otters", "emulator/long?tokens_per_second=100&long_tokens=300"
    )
    task = worker.start(started.job)
    running = worker._running[started.job.generation_pk]
    await eventually(lambda: running.state.seq > 2, what="a few deltas sent")
    layer = get_channel_layer()

    async def full(channel: str, message: dict[str, Any]) -> None:
        raise ChannelFull(channel)

    monkeypatch.setattr(layer, "send", full)  # deltas still come: they are group sends
    ws = await socket(started.conversation.pk, alice)
    assert (await connect(ws))[0]
    for ask in (False, True):  # as it starts watching, then asked after a gap
        if ask:
            request = {"t": "snapshot", "g": started.generation.pk}
            await ws.send_to(text_data=orjson.dumps(request).decode())
        while (message := await receive(ws))["t"] != "snapshot":
            assert message["t"] == "delta"
        assert message["g"] == started.generation.pk
        assert message["seq"] > 2
        assert message["content"]
    monkeypatch.undo()
    received = await collect_until_done(ws)  # the socket lives on to the end
    assert received[-1]["status"] == "completed"
    await asyncio.wait_for(task, 30)
    await ws.disconnect()


async def test_a_snapshot_ask_its_owners_channel_has_no_room_for_leaves_the_socket_open(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer running in another process whose control channel is full: the watch is still
    answered and the socket lives (the ask is let go; the page asks again at its next gap)."""
    started = await start_turn(alice, "otters", "emulator/echo")  # on record, run nowhere here
    layer = get_channel_layer()

    async def full(channel: str, message: dict[str, Any]) -> None:
        raise ChannelFull(channel)

    monkeypatch.setattr(layer, "send", full)
    ws = await socket(started.conversation.pk, alice)
    assert (await connect(ws))[0]  # answered `watching`
    await ws.send_to(text_data=orjson.dumps({"t": "snapshot", "g": started.generation.pk}).decode())
    await ws.send_to(text_data=orjson.dumps({"t": "watch", "c": started.conversation.pk}).decode())
    assert await receive(ws) == {"t": "watching", "c": started.conversation.pk}
    await ws.disconnect()
