"""A user deactivated by an admin loses their open sockets and their running answers at once,
in every process (chatapp/identity/deactivation.py, chatapp/ws/session_sockets.py).

The answer runs in A, the user's socket is open on B, and the deactivation is saved by a third
process (a `manage.py shell` on the same database and Redis, as an admin's save in any server
process would be): the socket must close with 4401 and the worker in A must cancel its upstream
request, which the emulator's record shows, long before the endless answer would have ended.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest
from websockets.exceptions import ConnectionClosed

from chatapp.ws.session_sockets import CLOSE_SIGNED_OUT
from gateway_client.emulator import EmulatorURL

from .servers import ROOT, Server, Socket, User, add_user, sign_in

pytestmark = pytest.mark.multiprocess

FAST = "emulator/chat?tokens_per_second=2000&ttft_ms=5"
ENDLESS = "emulator/long?tokens_per_second=40"
PASSWORD = "deactivation-password"


def deactivate(env: dict[str, str], username: str) -> None:
    code = (
        "from django.contrib.auth import get_user_model\n"
        f"user = get_user_model().objects.get(username={username!r})\n"
        "user.is_active = False\n"
        "user.save()\n"
    )
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", code],
        env=env, cwd=ROOT, check=True, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip


async def close_code(socket: Socket, within: float) -> int | None:
    """Read (the stream goes on until the close) until the socket closes; its close code."""
    async with asyncio.timeout(within):
        try:
            while True:
                await socket.next(within)
        except ConnectionClosed:
            pass
    return socket.connection.close_code


async def test_deactivating_a_user_stops_their_answer_in_a_and_closes_their_socket_on_b(
    server_a: Server,
    server_b: Server,
    cluster_env: dict[str, str],
    postgres_url: str,
    paced_emulator: EmulatorURL,
) -> None:
    add_user(postgres_url, "gina", PASSWORD)
    gina = User(sign_in(server_a, "gina", PASSWORD), postgres_url)
    conversation_id = await gina.new_conversation(server_a, "Hello there", FAST)
    await gina.wait_idle(conversation_id)
    async with gina.socket(server_b, conversation_id) as socket:
        generation_pk = await gina.send(server_a, conversation_id, "A long story", ENDLESS)
        await socket.follow(generation_pk, until="delta", within=10)
        deactivated_at = time.time()
        await asyncio.to_thread(deactivate, cluster_env, "gina")
        assert await close_code(socket, within=15) == CLOSE_SIGNED_OUT
    row = await gina.wait_generation(generation_pk, within=15)
    assert row["status"] == "cancelled"
    records = paced_emulator.app.records
    record = await asyncio.to_thread(records.wait_finished, row["upstream_id"], timeout=10)
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    assert deactivated_at < record.cancelled_at
