"""The htmx endpoints that change which branch a conversation shows: edit and resend a question,
and switch a message to another of its versions.

Each answers with the branch from the changed message down, which the page puts in place of that
message and everything after it (`data-branch-swap`, chat.js); a regenerated answer
(`chat.retry`) is shown the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_POST

from chatapp import records_thread
from chatapp.conversations.tree import shown_path
from chatapp.conversations.turns import StartedGeneration, create_edit, select_version
from chatapp.views.chat import answerer_for, chosen_model, start_version

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.http import HttpResponse

    from chatapp.authenticated import AuthenticatedRequest


@login_required
@require_POST
async def edit_message(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A new version of the question `pk` with the text sent, answered by the model the picker
    shows."""
    text = request.POST.get("content", "")
    model = request.POST.get("model", "")

    async def create(user: User, owner_channel: str) -> StartedGeneration:
        answerer = await answerer_for(request, *await chosen_model(model))
        return await records_thread.on_record_thread_from_view(
            create_edit,
            user=user,
            message_pk=pk,
            text=text,
            answerer=answerer,
            owner_channel=owner_channel,
        )

    return await start_version(request, create)


@login_required
@require_POST
def show_version(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Show the version `pk` of a message, with its newest descendants."""
    conversation, leaf = select_version(request.user, pk)
    path = shown_path(conversation, leaf_pk=leaf, since_pk=pk)
    return render(request, "chatapp/_messages.html", {"chat_messages": path})
