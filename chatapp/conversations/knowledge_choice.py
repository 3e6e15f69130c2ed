"""Which documents a message draws on, and the passages found in them for it: the collections
and files chosen in the composer (`#`, posted as `collections` and `knowledge_files`) and those
of the assistant its conversation was started with, searched once for the question before its
request goes out (`knowledge.retrieval.retrieve`, which sees only what the user may use), never
while the answer streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Subquery

from chatapp import shared_cache
from chatapp.access.shared_or_own import visible_to
from chatapp.assistants.models import Assistant
from chatapp.conversations.knowledge_context import CONTEXT_TOKENS
from chatapp.conversations.models import Conversation
from chatapp.conversations.turns import TurnError
from chatapp.costs.models import Generation
from chatapp.errors import ChatAppError
from chatapp.knowledge.models import Collection
from chatapp.knowledge.retrieval import retrieve

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.http import QueryDict

    from chatapp.knowledge.passages import Passage

MAX_CHOSEN = 20
"""Collections and files one message may name, each (a page never offers a way to more)."""


@dataclass(frozen=True, slots=True)
class KnowledgeChoice:
    """The collections and files a message draws on, by key."""

    collection_ids: tuple[int, ...] = ()
    file_ids: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.collection_ids or self.file_ids)

    def with_collections(self, more: tuple[int, ...]) -> KnowledgeChoice:
        """This choice and the collections `more` (an assistant's), each once."""
        merged = tuple(dict.fromkeys(self.collection_ids + more))
        return KnowledgeChoice(merged, self.file_ids)


def _keys(values: list[str]) -> tuple[int, ...]:
    if len(values) > MAX_CHOSEN:
        raise TurnError(f"Choose at most {MAX_CHOSEN} collections and {MAX_CHOSEN} files.")
    if not all(value.isdigit() and len(value) < 19 for value in values):
        raise TurnError("A chosen collection or file is not one of yours: choose it again.")
    return tuple(dict.fromkeys(int(value) for value in values))


def posted(data: QueryDict) -> KnowledgeChoice:
    """What the composer's chips posted (`TurnError` for what no page sends)."""
    return KnowledgeChoice(
        _keys(data.getlist("collections")), _keys(data.getlist("knowledge_files"))
    )


def _assistants_with_collections() -> frozenset[int]:
    rows = Assistant.collections.through.objects.values_list("assistant_id", flat=True)
    return frozenset(rows.distinct())


def assistant_collections(
    user: User, conversation_pk: int | None, assistant_pk: int | None
) -> tuple[int, ...]:
    """The collections of the assistant a conversation was started with (`conversation_pk`, or
    for a new chat `assistant_pk`) that `user` may use: a shared assistant may name a collection
    that is not shared with them, which it then leaves out rather than refuse the message.
    One statement, and none while no assistant has collections or the chat's is known to have
    none (`shared_cache`), as for most sends."""
    drawing = shared_cache.cached(("assistants_with_collections",), _assistants_with_collections)
    if not drawing or (conversation_pk is None and assistant_pk not in drawing):
        return ()
    assistant: int | Subquery
    if conversation_pk is not None:
        started = Conversation.objects.filter(pk=conversation_pk, user=user)
        assistant = Subquery(started.values("assistant_id")[:1])
    elif assistant_pk is not None:
        assistant = assistant_pk
    else:
        return ()
    visible = Collection.objects.filter(visible_to(user)).values("pk")
    chosen = Assistant.collections.through.objects.filter(
        assistant_id=assistant, collection_id__in=visible
    )
    return tuple(chosen.order_by("collection_id").values_list("collection_id", flat=True))


async def passages_for(
    user: User,
    choice: KnowledgeChoice,
    question: str,
    conversation_pk: int | None = None,
    ledger: list[int] | None = None,
) -> tuple[Passage, ...]:
    """The passages of `choice` most relevant to `question`, within the context's budget; none
    when nothing is chosen. A collection or file the user may not use is left out as if absent
    (`retrieve`), and a question the gateway did not embed is searched by its words alone; any
    other failure of the app's is a `TurnError` saying why, and nothing is sent. The question's
    embedding call is the user's spend, in `conversation_pk` when it has one already, its
    ledger rows added to `ledger` for `link_question` once the message exists."""
    if not choice or not question.strip():  # an empty message is refused, unsearched
        return ()
    try:
        found = await retrieve(
            user,
            list(choice.collection_ids),
            list(choice.file_ids),
            question,
            token_budget=CONTEXT_TOKENS,
            conversation_pk=conversation_pk,
            ledger=ledger,
        )
    except TurnError:
        raise
    except ChatAppError as exc:
        raise TurnError(f"The documents could not be searched: {exc}") from exc
    return tuple(found)


async def link_question(ledger: list[int], conversation_pk: int, question_pk: int | None) -> None:
    """The question's embedding rows (`ledger`, from `passages_for`) linked to the conversation
    and the user's message the turn wrote: the question was embedded before either existed (a
    new chat has no conversation yet), and the admin's cost history shows what each was for."""
    if ledger:
        await Generation.objects.filter(pk__in=ledger).aupdate(
            conversation_id=conversation_pk, question_id=question_pk
        )
