"""Starting a turn the user sent: the one function a view asks (`start_turn`; a message sent to
several models to compare, `start_comparison`).

A chat turn without files sends its upstream request first, once every check that could refuse
it has passed (`turns.early_request`: a new chat's one message, a follow-up's context read
ahead, one thread hop, nothing written), so the gateway prepares its first token while the
turn's rows are written on the records thread (`records_thread.on_record_thread_from_view`: it no
longer waits behind a burst's other turns); then the worker starts, reading that request
(`worker.start`). A turn that is refused after its request left closes it: the gateway stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async

from chatapp import records_thread
from chatapp.conversations.comparison import create_comparison
from chatapp.conversations.turns import (
    Answerer,
    StartedGeneration,
    TurnRequest,
    create_turn,
    early_request,
)
from chatapp.costs.models import Generation
from chatapp.streaming import worker

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.assistants.new_chat import StartedWith
    from chatapp.conversations.request_options import RequestOptions

__all__ = ["start_comparison", "start_turn"]


def sends_early(turn: TurnRequest) -> bool:
    """Whether `turn`'s request can leave before its rows are written: a chat answer without
    files or passages (the context is read from the rows, files included, once written, and
    passages are quoted into it as the turn is made) to a new chat or after a message the page
    names."""
    chat = turn.answerer.kind == Generation.Kind.CHAT
    alone = not turn.attached and not turn.passages
    return chat and alone and (turn.conversation_pk is None or turn.after is not None)


async def start_turn(user: User, turn: TurnRequest) -> StartedGeneration:
    """Start `turn`: its request sent early where it can be, its rows written, its worker
    started. Raises what refuses it (`turns.create_turn`, `turns.early_request`), its request
    closed and its place under the answer limit given back."""
    owner_channel = await worker.owner_channel()
    early = None
    admission = None
    try:
        gateway = turn.answerer.gateway  # the view's, as the picker chose it
        if gateway is not None and sends_early(turn):
            ahead = await sync_to_async(early_request)(user, turn)
            if ahead is not None:
                admission = ahead.admission
                early = worker.open_early(
                    gateway,
                    turn.answerer.model,
                    ahead.messages,
                    options=ahead.options,
                    tools=ahead.tools,
                )
        started = await records_thread.on_record_thread_from_view(
            create_turn, user=user, turn=turn, owner_channel=owner_channel, admission=admission
        )
    except BaseException:
        if admission is not None:
            admission.release()
        if early is not None:  # no generation will read it: cancel the request upstream
            await early.aclose()
        raise
    if admission is not None:
        admission.release()  # the generation is on record, and counts from now on
    worker.start(started.job, early=early)
    return started


async def start_comparison(
    user: User,
    conversation_pk: int | None,
    text: str,
    answerers: list[Answerer],
    *,
    after: int | None = None,
    options: RequestOptions | None = None,
    started_with: StartedWith | None = None,
) -> list[StartedGeneration]:
    """Start a turn answered by each of `answerers` side by side (`comparison.create_comparison`:
    its rows written on the records thread), then their workers. Nothing is sent early: the
    answers' requests wait for their rows."""
    owner_channel = await worker.owner_channel()
    started = await records_thread.on_record_thread_from_view(
        create_comparison,
        user=user,
        conversation_pk=conversation_pk,
        text=text,
        answerers=answerers,
        owner_channel=owner_channel,
        after=after,
        options=options,
        started_with=started_with,
    )
    for each in started:
        worker.start(each.job)
    return started
