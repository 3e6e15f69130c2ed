"""Creating a turn: the user's message, the assistant's placeholder, its generation record, and
the context sent upstream.

Context is every user message plus, per earlier turn, the latest assistant answer that has text
(a retried failure is replaced by its retry). Reasoning details go back unchanged, as Numes requires
for signed or encrypted reasoning; tool calls are not sent back since the app runs no tools.

An answer that ran out of its token budget is continued as a retry with a larger one: the Osmexo
docs say to raise the budget and retry when thinking used it all, with 4,096 "a safe default" for a
reasoning model. So `larger_budget` asks for twice what the answer used, at least 4,096.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.http import Http404

from .errors import ChatAppError
from .gateway import GatewayConfig, config_for
from .jobs import Job
from .models import Conversation, Generation, Message

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TITLE_LENGTH = 60
MAX_MESSAGE_CHARS = 100_000
SAFE_BUDGET = 4_096  # Osmexo's "safe default" max_tokens for a reasoning model
MAX_BUDGET = 32_768


class TurnError(ChatAppError, ValueError):
    """The user's input cannot start a turn; the message is for the user."""


@dataclass(frozen=True, slots=True)
class Turn:
    conversation: Conversation
    assistant: Message
    generation: Generation
    job: Job
    user_message: Message | None = None


def title_from(text: str) -> str:
    first_line = next((line.strip() for line in text.strip().split("\n") if line.strip()), "")
    if len(first_line) <= TITLE_LENGTH:
        return first_line
    return first_line[: TITLE_LENGTH - 1].rstrip() + "…"


def context_for(conversation: Conversation, before: Message) -> list[dict[str, Any]]:
    """The messages to send for an answer placed at `before` (which itself is not sent)."""
    turns: list[dict[str, Any]] = []
    answer: dict[str, Any] | None = None
    for message in conversation.messages.filter(pk__lt=before.pk).order_by("pk"):
        if message.role == Message.Role.USER:
            if answer is not None:
                turns.append(answer)
                answer = None
            turns.append({"role": "user", "content": message.content})
        elif message.content or message.reasoning_details:
            answer = {"role": "assistant", "content": message.content}
            if message.reasoning_details:
                answer["reasoning_details"] = message.reasoning_details
    # An answer after the last user message is an earlier attempt at the one being generated.
    return turns


def _owned_conversation(user: User, conversation_id: int) -> Conversation:
    try:
        return Conversation.objects.get(pk=conversation_id, user=user)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None


def _start(
    conversation: Conversation,
    gateway: GatewayConfig,
    model: str,
    owner_channel: str,
    user_message: Message | None = None,
    max_tokens: int | None = None,
) -> Turn:
    assistant = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT)
    generation = Generation.objects.create(
        message=assistant,
        conversation=conversation,
        gateway_id=gateway.pk,
        model=model,
        max_tokens=max_tokens,
        owner_channel=owner_channel,
    )
    conversation.gateway_id = gateway.pk
    conversation.model = model
    conversation.save(update_fields=["gateway", "model", "updated_at"])
    job = Job(
        generation_pk=generation.pk,
        message_pk=assistant.pk,
        conversation_pk=conversation.pk,
        gateway=gateway,
        model=model,
        messages=context_for(conversation, assistant),
        owner_channel=owner_channel,
        max_tokens=max_tokens,
    )
    return Turn(conversation, assistant, generation, job, user_message)


def checked_message(text: str, model: str) -> str:
    """The message to send (stripped), or a `TurnError` saying what is wrong with it."""
    text = text.strip()
    if not text:
        raise TurnError("Write a message first.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise TurnError(f"The message is too long (at most {MAX_MESSAGE_CHARS:,} characters).")
    if not model:
        raise TurnError("Choose a model first.")
    return text


def first_context(text: str) -> list[dict[str, Any]]:
    """The context of a new conversation's first answer: what `context_for` gives once stored."""
    return [{"role": "user", "content": text}]


def create_turn(
    user: User,
    conversation_id: int | None,
    text: str,
    model: str,
    owner_channel: str,
    gateway: GatewayConfig | None = None,
) -> Turn:
    """The user's message and a generation answering it (`gateway` None: the default one)."""
    text = checked_message(text, model)
    with transaction.atomic():
        if conversation_id is None:
            conversation = Conversation.objects.create(user=user, title=title_from(text))
        else:
            conversation = _owned_conversation(user, conversation_id)
            if not conversation.title:
                conversation.title = title_from(text)
                conversation.save(update_fields=["title"])
        question = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=text
        )
        return _start(conversation, gateway or config_for(None), model, owner_channel, question)


def create_retry(
    user: User,
    message_id: int,
    choice: tuple[GatewayConfig, str] | str | None,
    owner_channel: str,
) -> Turn:
    """A new generation for the turn that `message_id` (an assistant message) answered, with
    the gateway and model chosen (a bare model: on the answer's gateway; None: the answer's model
    too)."""
    with transaction.atomic():
        failed = _finished_answer(user, message_id)
        if not isinstance(choice, tuple):
            choice = (config_for(failed.generation.gateway_id), choice or failed.generation.model)
        return _start(failed.conversation, *choice, owner_channel)


def larger_budget(generation: Generation) -> int | None:
    """The `max_tokens` for another try at an answer that ran out of its budget: twice what it
    used (its budget, else its completion tokens, reasoning included), at least `SAFE_BUDGET`, at
    most `MAX_BUDGET`; None when that would be no larger."""
    used = generation.max_tokens or generation.completion_tokens
    budget = min(MAX_BUDGET, max(SAFE_BUDGET, 2 * (used or 0)))
    return budget if used is None or budget > used else None


def create_continuation(user: User, message_id: int, owner_channel: str) -> Turn:
    """A retry of the answer `message_id`, which ran out of its token budget, on its gateway and
    model with a `larger_budget`."""
    with transaction.atomic():
        cut = _finished_answer(user, message_id)
        budget = larger_budget(cut.generation)
        if cut.generation.finish_reason != "length" or budget is None:
            raise TurnError("Only an answer that ran out of its token budget gets a larger one.")
        gateway = config_for(cut.generation.gateway_id)
        return _start(
            cut.conversation, gateway, cut.generation.model, owner_channel, max_tokens=budget
        )


def _finished_answer(user: User, message_id: int) -> Message:
    """The user's assistant message `message_id`, with its generation, once that has ended."""
    try:
        answer = Message.objects.select_related("conversation", "generation").get(
            pk=message_id, role=Message.Role.ASSISTANT, conversation__user=user
        )
    except Message.DoesNotExist:
        raise Http404("No such message.") from None
    if answer.generation.is_running:
        raise TurnError("This answer is still being written.")
    return answer
