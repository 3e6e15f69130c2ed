"""A new chat's start: the assistant chosen beside its composer, and whether it is temporary.

Choosing an assistant fills the new chat's Settings with the assistant's (`choose_assistant`) and
moves the model picker to its model (the `chat:model-chosen` event compare.js acts on); the user
may still change either before sending. The first message then posts them as it posts any new
chat's Settings, with the assistant's pk, which the conversation records (`started_with`). A
composer that posts an assistant but no Settings (no script ran) gets the assistant's settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django_htmx.http import trigger_client_event

from chatapp import shared_cache
from chatapp.assistants import sharing
from chatapp.assistants.models import Assistant
from chatapp.assistants.new_chat import StartedWith
from chatapp.conversations.request_options import RequestOptions, options_for
from chatapp.conversations.turns import TurnError
from chatapp.gateways.catalog import choice_value
from chatapp.gateways.configs import GatewayUnavailable, config_for
from chatapp.views.answer_settings import chosen_options, new_chat_context

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.http import HttpResponse, QueryDict

    from chatapp.authenticated import AuthenticatedRequest

MODEL_CHOSEN = "chat:model-chosen"  # as comparison.MODEL_CHOSEN: compare.js moves the picker
NOT_AVAILABLE = "That assistant is no longer available to you: choose another, or none."
TEMPORARY_NOTE = "Temporary chat: not saved; its cost is still recorded."


LISTED = 200  # assistants in a new chat's list, by name


def assistants_for(user: User) -> list[Assistant]:
    """The assistants `user` may start a chat with, for the new chat's Assistant list; kept
    until one changes (`shared_cache`)."""
    return list(
        shared_cache.cached(
            ("assistants", user.pk), lambda: list(sharing.visible(Assistant, user)[:LISTED])
        )
    )


def picker_value(assistant: Assistant) -> str:
    """The model picker's value for `assistant`'s model ("" when it names none, or its gateway
    is gone)."""
    if not assistant.model:
        return ""
    try:
        gateway_pk = assistant.gateway_id or config_for(None).pk
    except GatewayUnavailable:
        return ""
    return choice_value(gateway_pk, assistant.model)


def _chosen_assistant(user: User, value: str) -> Assistant | None:
    if not value:
        return None
    found = sharing.visible(Assistant, user).filter(pk=value).first() if value.isdigit() else None
    if found is None:
        raise TurnError(NOT_AVAILABLE)
    return found


def new_chat_choice(user: User, data: QueryDict) -> tuple[RequestOptions | None, StartedWith]:
    """The settings a new chat's composer posts (None: the user's defaults), the assistant's
    when it posts an assistant and no Settings, and how the chat was started. `TurnError` in
    words for settings that are not valid or an assistant the user may not use. Database work:
    call off the event loop."""
    options = chosen_options(data, user.pk)
    assistant = _chosen_assistant(user, data.get("assistant", ""))
    if assistant is not None and options is None:
        options = options_for(assistant)
    started = StartedWith(
        assistant_pk=assistant.pk if assistant else None,
        assistant_name=assistant.name if assistant else "",
        temporary=data.get("temporary") == "1",
    )
    return options, started


@login_required
@require_GET
def choose_assistant(request: AuthenticatedRequest) -> HttpResponse:
    """The new chat's Settings, filled from the assistant chosen (none: from the user's
    defaults), and the picker moved to its model."""
    value = request.GET.get("assistant", "")
    try:
        assistant = _chosen_assistant(request.user, value)
    except TurnError:
        assistant = None
    model = picker_value(assistant) if assistant else request.GET.get("model", "")
    context: dict[str, Any] = {
        **new_chat_context(request.user, model, assistant),
        "chosen_assistant": assistant,
    }
    response = render(request, "chatapp/_new_chat_settings.html", context)
    if assistant is not None and model:
        response = trigger_client_event(response, MODEL_CHOSEN, {"value": model})
    return response
