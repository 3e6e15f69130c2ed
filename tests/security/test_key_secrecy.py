"""The gateway's API key appears nowhere a user or a log reader sees it, even from a gateway
that quotes the request, `Authorization` header and all, in every error it can send
(`scripted_gateway.ECHOES`: a 401's JSON, a 500's text, a 502's HTML, an error event mid-stream,
a malformed event, a refused read aloud, a missing generation record).

Over the real Daphne server, every page, fragment, export and websocket frame of the victim's
answers is searched for the key, and so is the server's log; in process, so is everything logged.
The control for each: the gateway really did receive the key (it quotes what it was sent).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest
from django.test import AsyncClient
from django.urls import reverse

from chatapp.costs.models import Generation
from chatapp.streaming import worker
from gateway_client.redaction import MASK
from tests.multiprocess.servers import Server, User

from .conftest import CANARY_KEY, websocket
from .scripted_gateway import ECHOES

# Any recognisable part of the key: a gateway may quote it cut, or a log line may.
KEY_PARTS = [CANARY_KEY, CANARY_KEY[:12], CANARY_KEY[-12:]]


def leaks(text: str) -> list[str]:
    return [part for part in KEY_PARTS if part in text]


async def answer_of(
    server: Server, user: User, model: str
) -> tuple[int, list[dict[str, Any]], str]:
    """Send a message with `model` and follow its answer on a socket: (message, frames, pages)."""
    conversation = await user.new_conversation(server, "hello", model)
    async with websocket(server, user) as socket:
        await socket.send({"t": "watch", "c": conversation})
        async with user.http(server) as http:
            page = (await http.get(f"/c/{conversation}/")).text
            generation = int(re.findall(r'data-generation="(\d+)"', page)[-1])
            message = int(
                re.findall(r'<article class="message assistant[^>]* data-message="(\d+)"', page)[-1]
            )
            # As the page does for an answer it shows: ended already, that is answered `done`.
            await socket.send({"t": "snapshot", "g": generation})
            await socket.follow(generation, within=15, joined_mid_stream=True)
            texts = [page]
            for path in (
                f"/c/{conversation}/",
                f"/m/{message}/",
                f"/m/{message}/source/",
                f"/c/{conversation}/export.md",
                f"/c/{conversation}/export.json",
                f"/m/{message}/speech/state/",
                "/",
                "/search/?q=hello",
            ):
                texts.append((await http.get(path)).text)
            speech = await http.get(
                f"/m/{message}/speech/", headers={"Sec-Fetch-Site": "same-origin"}
            )
            texts.append(speech.text)
            texts.append((await http.get(f"/m/{message}/speech/state/")).text)
    frames = [frame for _, frame in socket.received] + socket.spend_pushes
    return message, frames, "\n".join(texts) + repr(frames)


async def test_no_page_frame_or_log_line_of_the_server_shows_the_key(
    server: Server, victim: User
) -> None:
    seen = ""
    for model in ECHOES:
        _, frames, text = await answer_of(server, victim, model)
        assert any(message.get("t") == "done" for message in frames), model
        assert leaks(text) == [], model
        seen += text
    # The errors were shown (so the search above read them): in words, the key cut out.
    assert "Bad key. You sent" in seen
    assert "Upstream refused" in seen
    log = server.log_text()
    assert leaks(log) == [], [line for line in log.splitlines() if leaks(line)][:5]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("closed_clients")
@pytest.mark.parametrize("model", ECHOES)
async def test_nothing_stored_or_logged_in_process_shows_the_key(
    model: str, alice: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = AsyncClient()
    await client.aforce_login(alice)
    response = await client.post(reverse("chat:send_new"), {"content": "hi", "model": model})
    assert response.status_code == 302
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
    generation = await Generation.objects.select_related("message").aget()
    assert generation.status == Generation.Status.FAILED
    stored = " ".join(
        str(value)
        for value in (
            generation.error_message,
            generation.error_code,
            generation.error_type,
            generation.message.content if generation.message else "",
        )
    )
    assert leaks(stored) == [], stored
    logged = "\n".join(record.getMessage() for record in caplog.records)
    logged += "\n".join(caplog.text.splitlines())
    assert leaks(logged) == [], logged[:2000]
    # The control: the key was quoted back, and cut out where it was.
    assert MASK in stored, stored
