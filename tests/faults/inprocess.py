"""One answer run in this process, its gateway reached through a `FaultProxy`, watched by a page.

The page is the real websocket consumer through the ASGI stack (`WebsocketCommunicator`, session
auth) with a `ShownAnswer` applying what arrives as chat.js would, snapshot requests included.
After `done` it fetches the answer's final render, as the page does. The final write is counted,
so a test can tell that a generation ended exactly once.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client

from chatapp.asgi import application
from chatapp.conversations.turns import Answerer, TurnRequest, create_turn
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.messaging import socket_messages
from chatapp.streaming import persistence, worker
from gateway_client.emulator import EmulatorURL

from .browser_model import ShownAnswer
from .fault_proxy import Fault, FaultProxy, fault_proxy

WITHIN = 20.0  # seconds for any one answer to reach `done`


@dataclass
class Run:
    generation: Generation
    page: ShownAnswer
    render: str  # the answer's final render (`/m/<pk>/`), as the page fetches it after `done`
    final_writes: int
    proxy: FaultProxy

    @property
    def stored(self) -> str:
        return self.generation.message.content

    @property
    def error_shown(self) -> str:
        """The error the final render shows the user (empty if none)."""
        found = re.search(r'<p class="error" role="alert">(.*?)</p>', self.render, re.S)
        return html.unescape(found[1]) if found else ""

    @property
    def status_shown(self) -> str:
        found = re.search(r'data-status="([a-z]+)"', self.render)
        assert found is not None, self.render[:300]
        return found[1]


def target(emulator_url: EmulatorURL) -> tuple[str, int]:
    match = re.fullmatch(r"http://([\d.]+):(\d+)", str(emulator_url))
    assert match is not None, emulator_url
    return match[1], int(match[2])


class FinalWrites:
    """Counts `persistence.save_final` calls per generation."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[int] = Counter()
        save_final = persistence.save_final

        async def counted(generation_pk: int, *args: Any, **kwargs: Any) -> Any:
            self.calls[generation_pk] += 1
            return await save_final(generation_pk, *args, **kwargs)

        monkeypatch.setattr(persistence, "save_final", counted)


async def page_socket(
    user: Any, conversation_pk: int, page: ShownAnswer | None = None
) -> WebsocketCommunicator:
    def login() -> str:
        client = Client()
        client.force_login(user)
        return str(client.cookies["sessionid"].value)

    cookie = await sync_to_async(login)()
    headers = [
        (b"origin", b"http://127.0.0.1:8000"),
        (b"host", b"127.0.0.1:8000"),  # the page's own origin: the socket's exact-origin check
        (b"cookie", f"sessionid={cookie}".encode()),
    ]
    ws = WebsocketCommunicator(application, "/ws/chat/", headers)
    connected, _ = await ws.connect()
    assert connected
    await ws.send_to(text_data=orjson.dumps({"t": "watch", "c": conversation_pk}).decode())
    if page is not None:
        page.watch_sent()
    assert socket_messages.decode(await ws.receive_from(timeout=10)) == {
        "t": "watching",
        "c": conversation_pk,
    }
    return ws


async def follow(
    ws: WebsocketCommunicator, page: ShownAnswer, within: float = WITHIN
) -> ShownAnswer:
    """Apply what the socket receives until `done`, sending what the page would send back."""
    async with asyncio.timeout(within):
        while page.done is None:
            message = socket_messages.decode(await ws.receive_from(timeout=within))
            for reply in page.handle(message):
                await ws.send_to(text_data=orjson.dumps(reply).decode())
    return page


async def final_render(user: Any, message_pk: int) -> str:
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    response = await client.get(f"/m/{message_pk}/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    return response.content.decode()


async def run_answer(
    user: Any,
    settings: Any,
    upstream: tuple[str, int],
    plan: Callable[[int], Fault] | Fault,
    writes: FinalWrites,
    *,
    model: str = "emulator/chat",
    text: str = "Tell me about otters",
) -> Run:
    """Send `text` through a proxy with `plan` in front of the gateway, and watch the answer."""
    async with fault_proxy(upstream, plan) as proxy:
        settings.LLM_BASE_URL = f"{proxy.url}/numes/api/v1"  # the default gateway's row
        configs.forget_configs()
        owner = await worker.owner_channel()
        started = await sync_to_async(create_turn)(
            user, TurnRequest(text=text, answerer=Answerer(model=model)), owner
        )
        ws = await page_socket(user, started.conversation.pk)
        try:
            page = ShownAnswer(started.generation.pk)
            task = worker.start(started.job)
            await follow(ws, page)
            await asyncio.wait_for(task, WITHIN)
        finally:
            await ws.disconnect()
        generation = await Generation.objects.select_related("message").aget(
            pk=started.generation.pk
        )
        render = await final_render(user, generation.message.pk)
        return Run(generation, page, render, writes.calls[generation.pk], proxy)


def assert_ended_once_and_shown_a_prefix(run: Run) -> None:
    """The properties every fault must keep, whatever the user is told."""
    generation, page = run.generation, run.page
    assert generation.status != Generation.Status.STREAMING
    assert generation.finished_at is not None
    assert run.final_writes == 1, f"the final state was written {run.final_writes} times"
    assert page.dones == 1
    assert page.done == {
        "t": "done",
        "g": generation.pk,
        "seq": generation.last_seq,
        "status": generation.status,
    }
    assert run.status_shown == generation.status
    assert page.not_prefix_of(run.stored) == [], (page.shown[-1:], run.stored)
    # Everything sent reached the page before `done`: what it shows is the stored text.
    assert page.content == run.stored
    assert page.seq == generation.last_seq
