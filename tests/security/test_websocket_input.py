"""What the page's websocket does with bad and excessive input, over a real Daphne server: each
bad message gets an error in words and the same socket then works as before (it watches a
conversation and streams its answer); a flood gets one error, then the socket is closed with
`message_limits.CLOSE_TOO_FAST`; a burst as large as normal use is served in full. Past Daphne's own
cap (1 MiB) a message never reaches the consumer: Daphne drops the connection.
"""

from __future__ import annotations

import re

import orjson
from django.conf import settings
from websockets.exceptions import ConnectionClosed

from chatapp.ws import message_limits
from tests.multiprocess.servers import Server, Socket, User

from .conftest import websocket

DAPHNE_MAX_MESSAGE = 1024 * 1024  # Daphne's own cap, before the consumer sees a message
EXPECTED = "(expected one of watch, snapshot, stop)."
MALFORMED: list[tuple[str | bytes, str]] = [
    (b'{"t": "watch", "c": 1}', "Binary messages are not accepted; send JSON text."),
    ("not json", "The message is not valid JSON."),
    ('{"t": "watch", "c": 1', "The message is not valid JSON."),
    ("", "The message is not valid JSON."),
    ("\x00\x01\x7f", "The message is not valid JSON."),
    ("[1, 2]", "The message must be a JSON object with a type, `t`."),
    ('"watch"', "The message must be a JSON object with a type, `t`."),
    ("5", "The message must be a JSON object with a type, `t`."),
    ("null", "The message must be a JSON object with a type, `t`."),
    ('{"c": 1}', f"Unknown message type None {EXPECTED}"),
    ('{"t": "delete", "c": 1}', f"Unknown message type 'delete' {EXPECTED}"),
    ('{"t": ["watch"], "c": 1}', f"Unknown message type ['watch'] {EXPECTED}"),
    ('{"t": "watch"}', "`c` must be a positive integer ID."),
    ('{"t": "watch", "c": "1"}', "`c` must be a positive integer ID."),
    ('{"t": "watch", "c": true}', "`c` must be a positive integer ID."),
    ('{"t": "watch", "c": 1.5}', "`c` must be a positive integer ID."),
    ('{"t": "watch", "c": -1}', "`c` must be a positive integer ID."),
    ('{"t": "watch", "c": 18446744073709551615}', "`c` must be a positive integer ID."),
    ('{"t": "stop", "g": {"$gt": 0}}', "`g` must be a positive integer ID."),
    ('{"t": "snapshot", "g": null}', "`g` must be a positive integer ID."),
]


async def streams_an_answer(socket: Socket, server: Server, user: User) -> None:
    """The socket still works: it watches a new conversation, streams its answer (a snapshot,
    then deltas) and stops it."""
    conversation = await user.new_conversation(server, "still there?", "slow")
    await socket.send({"t": "watch", "c": conversation})
    await socket.watched(conversation, within=10)
    async with user.http(server) as http:
        page = (await http.get(f"/c/{conversation}/")).text
    generation = int(re.findall(r'data-generation="(\d+)"', page)[-1])
    stream = await socket.follow(generation, within=10, until="delta", joined_mid_stream=True)
    assert "tick" in stream.deltas[0]["content"]
    await socket.send({"t": "stop", "g": generation})
    stream = await socket.follow(generation, within=10, joined_mid_stream=True)
    assert stream.done is not None
    assert stream.done["status"] == "cancelled"


async def closed_by_server(socket: Socket) -> ConnectionClosed:
    """What the socket receives until the server closes it; how it closed."""
    while True:
        try:
            await socket.next(10)
        except ConnectionClosed as closed:
            return closed


async def test_malformed_messages_get_an_error_and_the_socket_keeps_working(
    server: Server, victim: User
) -> None:
    async with websocket(server, victim) as socket:
        for sent, error in MALFORMED:
            await socket.connection.send(sent)
            assert await socket.next(10) == {"t": "error", "error": error}, sent
        await streams_an_answer(socket, server, victim)


async def test_an_oversized_message_is_refused_and_the_socket_keeps_working(
    server: Server, victim: User
) -> None:
    limit = settings.CHAT_WS_MAX_MESSAGE
    async with websocket(server, victim) as socket:
        padded = {"t": "watch", "c": 1, "pad": "x" * limit}
        await socket.connection.send(orjson.dumps(padded).decode())
        error = f"The message is too large (at most {limit:,} characters)."
        assert await socket.next(10) == {"t": "error", "error": error}
        await streams_an_answer(socket, server, victim)


async def test_a_message_past_daphnes_cap_drops_the_socket(server: Server, victim: User) -> None:
    async with websocket(server, victim) as socket:
        await socket.connection.send("x" * (DAPHNE_MAX_MESSAGE + 1))
        closed = await closed_by_server(socket)
    # Autobahn fails the connection (1009 on its side) by dropping it, without a close frame.
    assert closed.rcvd is None
    assert not socket.received  # nothing of it was acted on
    async with websocket(server, victim) as socket:  # the server serves the next socket
        await streams_an_answer(socket, server, victim)


async def test_a_burst_of_normal_size_is_served(server: Server, victim: User) -> None:
    async with websocket(server, victim) as socket:
        for _ in range(settings.CHAT_WS_BURST):
            await socket.connection.send('{"t": "watch", "c": 999999}')
        for _ in range(settings.CHAT_WS_BURST):
            assert await socket.next(10) == {"t": "gone", "c": 999999}


async def test_a_flood_gets_one_error_then_the_socket_is_closed(
    server: Server, victim: User
) -> None:
    async with websocket(server, victim) as socket:
        sent = 0
        try:
            for _ in range(20 * settings.CHAT_WS_BURST):
                await socket.connection.send('{"t": "watch", "c": 999999}')
                sent += 1
        except ConnectionClosed:
            pass  # closed while still sending
        closed = await closed_by_server(socket)
        errors = [message for _, message in socket.received if message["t"] == "error"]
        rate = settings.CHAT_WS_MESSAGES_PER_SECOND
        assert errors == [{"t": "error", "error": message_limits.too_fast(rate)}]
        assert closed.rcvd is not None
        assert closed.rcvd.code == message_limits.CLOSE_TOO_FAST
        # Everything let through before the limit was answered.
        gone = [message for _, message in socket.received if message["t"] == "gone"]
        assert settings.CHAT_WS_BURST <= len(gone) < sent
