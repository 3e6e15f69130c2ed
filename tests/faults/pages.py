"""A page on a real server's websocket: `ShownAnswer` fed by a `tests.multiprocess` socket."""

from __future__ import annotations

import asyncio

from websockets.exceptions import ConnectionClosed

from tests.multiprocess.servers import Endpoint, Socket, User

from .browser_model import ShownAnswer


async def follow_page(socket: Socket, page: ShownAnswer, *, within: float) -> ShownAnswer:
    """Apply what `socket` receives (all so far, then new) until `done`, sending what the page
    would send back (its snapshot requests)."""
    for _, message in socket.received:
        for reply in page.handle(message):
            await socket.send(reply)
    async with asyncio.timeout(within):
        while page.done is None:
            for reply in page.handle(await socket.next(within)):
                await socket.send(reply)
    return page


async def follow_reconnecting(
    user: User, server: Endpoint, conversation_pk: int, page: ShownAnswer, *, within: float
) -> list[int | None]:
    """`follow_page` on a socket that the page opens again whenever it closes, after chat.js's
    reconnect delay (250 ms, doubling to 5 s); the close codes it saw."""
    closes: list[int | None] = []
    delay = 0.25
    async with asyncio.timeout(within):
        while page.done is None:
            try:
                async with user.socket(server, conversation_pk) as socket:
                    delay = 0.25
                    await follow_page(socket, page, within=within)
            except ConnectionClosed as exc:
                closes.append(exc.rcvd.code if exc.rcvd is not None else None)
            except OSError:
                closes.append(None)
            if page.done is None:
                await asyncio.sleep(delay)  # chat.js's reconnect timer, not a wait for a state
                delay = min(delay * 2, 5.0)
    return closes
