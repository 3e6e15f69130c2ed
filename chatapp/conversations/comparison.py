"""Comparing models: one question sent to two or three at once, and the answer chosen from them.

A comparison is a question with one answer per model, started together: each a generation of
its own (its cost, its Stop), siblings in the message tree like a regenerated answer's, so once
one is chosen the others are its versions ("2 / 3") with nothing more to store. Until then
`Conversation.comparing` names the question, and the branch shown ends in its answers side by
side (`tree.shown_path`). The next turn clears it (`turns.start_generation`): a follow-up sent
without choosing goes on from `turns.default_choice`. Comparisons are of chat answers without
tools: a tool round would be a second answer under one column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import transaction
from django.http import Http404

from chatapp.access import rate_limits
from chatapp.assistants.new_chat import StartedWith
from chatapp.conversations import request_options
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.tree import MessageTree
from chatapp.conversations.turns import (
    Answerer,
    StartedGeneration,
    TurnError,
    checked_message,
    follow_up_parent,
    idle_conversation,
    own_message,
    start_generation,
    title_from,
)
from chatapp.costs.models import Generation

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_MODELS = 3
TOO_MANY = f"Compare at most {MAX_MODELS} models at once."


def create_comparison(
    user: User,
    conversation_pk: int | None,
    text: str,
    answerers: list[Answerer],
    owner_channel: str,
    *,
    after: int | None = None,
    options: request_options.RequestOptions | None = None,
    started_with: StartedWith | None = None,
) -> list[StartedGeneration]:
    """The user's message and one generation answering it per chat model of `answerers`,
    in their order, each refused or allowed by the rate and spending limits as a turn's is; the
    first answer is the leaf, and the conversation compares them. A follow-up comes after
    `after` as `create_turn`'s does; a new conversation has the settings `options` (None: the
    user's defaults) and is `started_with` an assistant or as a temporary chat."""
    if not 2 <= len(answerers) <= MAX_MODELS:
        raise TurnError(TOO_MANY if answerers else "Choose a model first.")
    for answerer in answerers:
        text = checked_message(text, answerer.model)
    rate_limits.check_generation_start(user, starting=len(answerers))
    with transaction.atomic():
        parent_pk = None
        if conversation_pk is None:
            values = (
                request_options.defaults_for(user)
                if options is None
                else request_options.row_values(options)
            )
            how = (started_with or StartedWith()).row_values()
            conversation = Conversation.objects.create(
                user=user, title=title_from(text), **values, **how
            )
        else:
            conversation = idle_conversation(user, conversation_pk)
            parent_pk = follow_up_parent(conversation, after)
            if not conversation.title:
                conversation.title = title_from(text)
                conversation.save(update_fields=["title"])
        question = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=text, parent_id=parent_pk
        )
        started = [
            start_generation(
                conversation, answerer, owner_channel, question.pk, user_message=question, tools=()
            )
            for answerer in answerers
        ]
        # The picker's model (the first) is the one the page offers next, as for one answer.
        first = started[0].generation
        conversation.gateway_id, conversation.model = first.gateway_id, first.model
        conversation.current_leaf = started[0].assistant
        conversation.comparing = question
        conversation.save(update_fields=["gateway", "model", "current_leaf", "comparing"])
    return started


@dataclass(frozen=True, slots=True)
class Choice:
    """An answer chosen from a comparison: the leaf now shown (the answer), its question, and the
    others still being written, as (generation pk, owner channel), to stop: they are its
    versions now."""

    conversation: Conversation
    leaf_pk: int
    question_pk: int
    still_running: list[tuple[int, str]]


def choose_answer(user: User, message_pk: int) -> Choice:
    """Choose the user's answer `message_pk` from the comparison it is in: it becomes the leaf,
    its model the conversation's, and the comparison ends. A 404 for an answer that is in none
    (any more)."""
    with transaction.atomic():
        answer = own_message(user, message_pk, Message.Role.ASSISTANT)
        # Locked as a turn locks it, so a follow-up goes on from this choice or comes first.
        conversation = Conversation.objects.select_for_update().get(pk=answer.conversation_id)
        if answer.parent_id is None or answer.parent_id != conversation.comparing_id:
            raise Http404("No such comparison.")
        conversation.current_leaf_id = MessageTree(conversation.pk).newest_below(answer.pk)
        conversation.comparing = None
        # The follow-up goes to the model chosen, as the picker then shows.
        generation = Generation.objects.get(message=answer)
        conversation.gateway_id, conversation.model = generation.gateway_id, generation.model
        conversation.save(update_fields=["current_leaf", "comparing", "gateway", "model"])
        others = Generation.objects.filter(
            message__parent_id=answer.parent_id, status=Generation.Status.STREAMING
        ).exclude(message_id=answer.pk)
        still_running = list(others.values_list("pk", "owner_channel"))
    return Choice(conversation, conversation.current_leaf_id, answer.parent_id, still_running)
