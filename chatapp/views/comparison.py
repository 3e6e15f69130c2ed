"""The htmx endpoints of comparing models (`conversations/comparison.py`): the composer's send
when it names models to compare beside the picker's (`compare`), and "Continue with this".

The composer posts to one address either way: a send without `compare` is `chat.send_message`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from chatapp import records_thread
from chatapp.conversations.comparison import (
    MAX_MODELS,
    TOO_MANY,
    Choice,
    choose_answer,
)
from chatapp.conversations.tree import shown_path
from chatapp.conversations.turns import NewerMessages, TurnError
from chatapp.costs.models import Generation
from chatapp.gateways.catalog import choice_value
from chatapp.streaming import stopping, turn_start
from chatapp.views import chat
from chatapp.views.new_chat import new_chat_choice

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse

    from chatapp.authenticated import AuthenticatedRequest

NOT_CHAT = "Only chat models can be compared; {model} makes images."
MODEL_CHOSEN = "chat:model-chosen"  # the event the page is sent with the chosen answer's model
NO_FILES = "Files go to one model at a time: remove the attached files, or the models to compare."


@login_required
@require_POST
async def send(request: AuthenticatedRequest, pk: int | None = None) -> HttpResponse:
    """The composer's message: to the picker's model and each model to compare beside it (side
    by side), or to the picker's alone (`chat.send_message`)."""
    compare = [value for value in request.POST.getlist("compare") if value]
    if not compare:
        return await chat.send_message(request, pk)
    user = await request.auser()
    try:
        if len(compare) >= MAX_MODELS:
            raise TurnError(TOO_MANY)
        if await sync_to_async(chat.posted_files)(request):  # never dropped unsaid
            raise TurnError(NO_FILES)
        # A new chat's Settings (None: the user's defaults), assistant and temporariness.
        options, started_with = (
            await sync_to_async(new_chat_choice)(user, request.POST) if pk is None else (None, None)
        )
        answerers = []
        for value in [request.POST.get("model", ""), *compare]:
            answerer = await chat.answerer_for(request, *await chat.chosen_model(value))
            if answerer.kind != Generation.Kind.CHAT:
                raise TurnError(NOT_CHAT.format(model=answerer.model))
            answerers.append(answerer)
        started = await turn_start.start_comparison(
            user,
            pk,
            request.POST.get("content", ""),
            answerers,
            after=chat.posted_after(request),
            options=options,
            started_with=started_with,
        )
    except NewerMessages as exc:
        if pk is None:
            raise
        return await sync_to_async(chat.newer_messages)(request, pk, exc)
    except chat.REFUSALS as exc:
        return await sync_to_async(chat.composer_error)(request, exc)
    return await chat.turn_response(request, pk, started[0])


@login_required
@require_POST
async def choose(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Go on from the answer `pk` of a comparison: its question and it take the comparison's
    place; the others are its versions, and those still being written stop where they are."""
    chosen = await records_thread.on_record_thread_from_view(
        choose_answer, await request.auser(), pk
    )
    await stopping.cancel(chosen.still_running)
    return await sync_to_async(_chosen_branch)(request, chosen)


def _chosen_branch(request: HttpRequest, chosen: Choice) -> HttpResponse:
    conversation = chosen.conversation
    path = shown_path(conversation, leaf_pk=chosen.leaf_pk, since_pk=chosen.question_pk)
    response = render(request, "chatapp/_messages.html", {"chat_messages": path})
    if conversation.gateway_id is None:
        return response
    # The picker shows the model chosen, which the follow-up goes to (compare.js).
    value = choice_value(conversation.gateway_id, conversation.model)
    return trigger_client_event(response, MODEL_CHOSEN, {"value": value})
