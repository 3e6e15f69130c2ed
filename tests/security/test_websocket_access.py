"""Who may open the page's websocket, and what it serves them, over a real Daphne server.

A handshake from another site's page (cross-site websocket hijacking: the browser sends the
victim's cookie along), from another origin of the same site (another port or scheme: cookies
do not tell ports apart), without an `Origin`, and an anonymous one are refused before the socket
opens. A signed-in
user's socket answers every command naming another user's conversation or generation (all of
`message_limits.ID_FIELDS`, so a new command is covered when it is added) as it answers one that
does not exist, and changes nothing: the victim's answer streams on and only its owner stops it.
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.testing import WebsocketCommunicator
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from chatapp.ws import message_limits
from chatapp.ws.origin import SameOriginValidator
from deploy.processes import free_port
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


def same_site_origins(server: Server) -> list[str]:
    """Origins whose pages a browser sends the server's cookies from, but that are not its own."""
    other_port = free_port()
    return [
        f"http://127.0.0.1:{other_port}",  # the review's: another port
        f"https://127.0.0.1:{server.port}",  # another scheme
        f"ws://127.0.0.1:{server.port}",  # not an origin at all
        f"http://localhost:{server.port}",  # an allowed host, but not the one the page is on
        "http://127.0.0.1",
        f"http://127.0.0.1:{server.port}/ws/chat/",
        f"http://user@127.0.0.1:{server.port}",
    ]


async def test_another_origin_of_the_same_site_cannot_open_a_signed_in_socket(
    server: Server, victim: User
) -> None:
    for origin in same_site_origins(server):
        with pytest.raises(InvalidStatus) as refused:
            async with websocket(server, victim, origin=origin):
                pass
        assert refused.value.response.status_code == 403, origin


async def test_a_handshake_without_an_origin_is_refused(server: Server, victim: User) -> None:
    cookie = "; ".join(f"{k}={v}" for k, v in victim.cookies.items())
    with pytest.raises(InvalidStatus) as refused:
        async with connect(
            f"ws://127.0.0.1:{server.port}/ws/chat/",
            origin=None,
            additional_headers={"Cookie": cookie},
            open_timeout=10,
        ):
            pass
    assert refused.value.response.status_code == 403


class Accept(AsyncWebsocketConsumer):  # type: ignore[misc]
    async def connect(self) -> None:
        await self.accept()


async def handshake(origin: str, host: str = "chat.example.com", scheme: str = "ws") -> bool:
    """Whether the origin check lets the socket in. Channels' connect closes the thread's stale
    database connections first, so a test that calls this needs database access: one left open
    by an earlier test in the same worker is checked, and pytest-django refuses that otherwise
    (the order decides, and under xdist it differs from run to run)."""
    headers = [(b"host", host.encode()), (b"origin", origin.encode())]
    communicator = WebsocketCommunicator(
        SameOriginValidator(Accept.as_asgi()), "/ws/chat/", headers=headers
    )
    communicator.scope["scheme"] = scheme
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return bool(connected)


@pytest.mark.django_db  # a consumer's connect closes stale connections: see `handshake`
async def test_behind_a_tls_proxy_the_page_is_https(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.DJANGO_HTTPS = True
    assert await handshake("https://chat.example.com")
    assert await handshake("https://chat.example.com:443")
    assert not await handshake("http://chat.example.com")  # the page is never http there
    assert not await handshake("https://chat.example.com:8443")
    settings.DJANGO_HTTPS = False
    assert await handshake("http://chat.example.com")
    assert not await handshake("https://chat.example.com")
    assert await handshake("https://chat.example.com", scheme="wss")


@pytest.mark.django_db  # a consumer's connect closes stale connections: see `handshake`
async def test_a_host_that_is_not_allowed_is_no_origin_of_ours(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    # DNS rebinding: the attacker's name pointed at this server, Origin and Host agreeing.
    assert not await handshake("http://evil.example", host="evil.example")


@pytest.mark.django_db  # a consumer's connect closes stale connections: see `handshake`
async def test_csrf_trusted_origins_are_trusted_exactly(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.net", "https://*.example.org"]
    assert await handshake("https://chat.example.net")
    assert await handshake("https://a.example.org")
    assert not await handshake("http://chat.example.net")
    assert not await handshake("https://chat.example.net:8443")
    assert not await handshake("https://example.org.evil.example")
    assert not await handshake("http://a.example.org")


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
        for kind, field in message_limits.ID_FIELDS.items():
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
