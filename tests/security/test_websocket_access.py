"""Who may open the page's websocket, and what it serves them, over a real Daphne server.

A handshake from another site's page (cross-site websocket hijacking: the browser sends the
victim's cookie along) and an anonymous one are refused before the socket opens. A signed-in
user's socket answers every command naming another user's conversation or generation (all of
`ws_limits.ID_FIELDS`, so a new command is covered when it is added) as it answers one that
does not exist, and changes nothing: the victim's answer streams on and only its owner stops it.
"""

from __future__ import annotations

import pytest
from websockets.exceptions import InvalidStatus

from chatapp import ws_limits
from tests.multiprocess.servers import Server, User

from .conftest import running_generation, websocket

FOREIGN_ORIGINS = ["http://evil.example", "http://127.0.0.1.evil.example", "null"]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
async def test_a_foreign_origin_cannot_open_a_signed_in_socket(
    server: Server, victim: User, origin: str
) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with websocket(server, victim, origin=origin):
            pass
    assert refused.value.response.status_code == 403
    # The control: the same cookie from the app's own page opens the socket.
    async with websocket(server, victim) as socket:
        await socket.send({"t": "watch", "c": 999999})
        assert await socket.next(10) == {"t": "gone", "c": 999999}


async def test_an_anonymous_socket_is_refused(server: Server) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with websocket(server, None):
            pass
    assert refused.value.response.status_code == 403


async def test_another_users_conversation_and_generation_are_refused_by_id(
    server: Server, victim: User, mallory: User
) -> None:
    conversation, generation = await running_generation(server, victim)
    ids = {"c": conversation, "g": generation}
    async with websocket(server, mallory) as socket:
        for kind, field in ws_limits.ID_FIELDS.items():
            await socket.send({"t": kind, field: ids[field]})
            assert await socket.next(10) == {"t": "gone", field: ids[field]}, kind
    assert [message for _, message in socket.received if message["t"] != "gone"] == []
    # The victim's answer was neither stopped nor read: it streams on, and its owner stops it.
    async with websocket(server, victim) as socket:
        await socket.send({"t": "watch", "c": conversation})
        stream = await socket.follow(generation, within=10, until="delta", joined_mid_stream=True)
        assert stream.done is None
        await socket.send({"t": "stop", "g": generation})
        stream = await socket.follow(generation, within=10, joined_mid_stream=True)
        assert stream.done is not None
        assert stream.done["status"] == "cancelled"
