"""Read aloud spends only once across server processes: requests for one answer's reading that
land on two servers at once make one read aloud, one request upstream and one row in the ledger.
Each server's requests join the read aloud that server runs; the other server's are refused in
words (the answer's row is locked while a read aloud is claimed, on PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import psycopg
import pytest

from gateway_client.emulator import EmulatorURL
from tests.waiting import eventually

from .servers import Server, User

pytestmark = pytest.mark.multiprocess

FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
SPEECH = "emulator/audio?tokens_per_second=20"  # a chunk every 0.05 s: all requests overlap
IN_FLIGHT = "This answer is being read aloud already"
EACH = 10  # requests per server


async def _sql(user: User, query: str, *args: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(user.database_url, autocommit=True) as db:
        cursor = await db.execute(query, list(args))
        return await cursor.fetchall() if cursor.description else []


async def _offered(user: User, server: Server, answer: int) -> bool:
    """Whether `server` offers Read aloud under the answer (its gateway config is fresh)."""
    return ">Read aloud</button>" in (await user.get(server, f"/m/{answer}/")).text


async def _read(client: httpx.AsyncClient, answer: int) -> tuple[int, bytes]:
    response = await client.get(f"/m/{answer}/speech/", headers={"Sec-Fetch-Site": "same-origin"})
    return response.status_code, response.content


async def test_requests_on_two_servers_make_one_read_aloud(
    user: User, server_a: Server, server_b: Server, paced_emulator: EmulatorURL
) -> None:
    conversation = await user.new_conversation(server_a, "Otters?", FAST)
    await user.wait_idle(conversation)
    ((answer,),) = await _sql(
        user, "SELECT message_id FROM chatapp_generation WHERE conversation_id = %s", conversation
    )
    await _sql(user, "UPDATE chatapp_gateway SET speech_model = %s", SPEECH)
    try:
        await _read_at_once(user, server_a, server_b, paced_emulator, answer)
    finally:
        await _sql(user, "UPDATE chatapp_gateway SET speech_model = ''")


async def _read_at_once(
    user: User, server_a: Server, server_b: Server, paced_emulator: EmulatorURL, answer: int
) -> None:
    for server in (server_a, server_b):
        await eventually(lambda s=server: _offered(user, s, answer), what="Read aloud", within=20)
    before = {record.id for record in paced_emulator.app.records.all()}

    async with user.http(server_a) as on_a, user.http(server_b) as on_b:
        on_a.timeout = on_b.timeout = httpx.Timeout(30)
        outcomes = await asyncio.gather(
            *(_read(client, answer) for _ in range(EACH) for client in (on_a, on_b))
        )

    played = [body for status, body in outcomes if status == 200]
    refused = [body.decode() for status, body in outcomes if status == 409]
    assert len(played) + len(refused) == 2 * EACH, [status for status, _ in outcomes]
    assert len(played) >= EACH, "every request of the server that reads joined it"
    assert len(set(played)) == 1, "each heard all of it"
    assert played[0]
    assert all(text.startswith(IN_FLIGHT) for text in refused)
    asked = [
        record
        for record in paced_emulator.app.records.all()
        if record.id not in before and record.endpoint == "audio/speech"
    ]
    assert len(asked) == 1, "one request upstream"
    rows = await _sql(
        user, "SELECT count(*) FROM chatapp_generation WHERE read_aloud_id = %s", answer
    )
    assert rows == [(1,)], "one reading in the ledger"
