"""`streaming.turn_start`: the one function a send asks to start its turn, and what it asks of
the catalog (the gateway's model list, once a send)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.urls import reverse

from chatapp.conversations import turns
from chatapp.conversations.turns import Answerer, TurnRequest
from chatapp.costs.models import Generation
from chatapp.gateways import catalog
from chatapp.streaming import worker
from chatapp.streaming.turn_start import sends_early
from tests.chatapp.conftest import logged_in, start_turn

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}


def counting(monkeypatch: pytest.MonkeyPatch, where: Any, name: str) -> list[object]:
    """Every call of `where.name` from now on, as it goes on to run."""
    calls: list[object] = []
    real: Callable[..., Any] = getattr(where, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(where, name, counted)
    return calls


@pytest.mark.parametrize("new_chat", [True, False], ids=["new-chat", "follow-up"])
async def test_a_send_reads_its_models_list_once(
    alice: Any, monkeypatch: pytest.MonkeyPatch, new_chat: bool
) -> None:
    """The model's kind and whether it takes images come from the one list read for the send
    (a follow-up asked the catalog three times: the list, then its last list twice)."""
    first = await start_turn(alice, "Say otters", "emulator/echo")
    await asyncio.wait_for(worker.start(first.job), 30)
    client = await logged_in(alice)
    if new_chat:
        url, data = reverse("chat:send_new"), {}
    else:
        url = reverse("chat:send", args=[first.conversation.pk])
        data = {"after": str(first.assistant.pk)}
    listed = counting(monkeypatch, catalog, "list_models")
    last_list = counting(monkeypatch, turns, "takes_images")
    response = await client.post(
        url, {"content": "And seals?", "model": "emulator/chat", **data}, headers=HTMX
    )
    assert response.status_code == 200
    assert response.get("HX-Retarget") != "#composer-error", response.content.decode()[:300]
    assert last_list == [], "the send's own list said it"
    # A new chat is answered with its whole page, whose picker lists every gateway's models.
    assert len(listed) == (2 if new_chat else 1)
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)
    answer = await Generation.objects.aget(message__parent__content="And seals?")
    assert answer.status == Generation.Status.COMPLETED


@pytest.mark.parametrize(
    ("kind", "attached", "conversation_pk", "after", "early"),
    [
        (Generation.Kind.CHAT, (), None, None, True),  # a new chat: its one message
        (Generation.Kind.CHAT, (), 7, 12, True),  # a follow-up after the message shown
        (Generation.Kind.CHAT, (), 7, None, False),  # the page did not say what it shows
        (Generation.Kind.CHAT, ("file",), None, None, False),  # its context is read from rows
        (Generation.Kind.IMAGE, (), None, None, False),  # an image generation
    ],
)
def test_which_turns_send_their_request_before_their_rows_are_written(
    kind: Generation.Kind,
    attached: tuple[Any, ...],
    conversation_pk: int | None,
    after: int | None,
    early: bool,
) -> None:
    turn = TurnRequest(
        text="hi",
        answerer=Answerer(model="emulator/chat", kind=kind),
        conversation_pk=conversation_pk,
        after=after,
        attached=attached,
    )
    assert sends_early(turn) is early
