"""Which generation a log line is about, on every line logged while a generation's worker runs.

The worker binds its generation when it starts (`bind_generation`); the IDs live in a contextvar,
so they follow the worker's asyncio task, the tasks it starts and the `sync_to_async` calls it
makes (asgiref copies the context), and never leak into another generation's lines. The IDs are
our database keys (`Generation.pk`, `Conversation.pk`), not the gateway's generation ID.
`ContextFilter`, on the one log handler (settings.LOGGING), puts them on each record for the
formatters: `generation` and `conversation` (None outside a generation) and `context`, the
plain format's " [generation=12 conversation=3]" (empty outside one).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ContextFilter", "GenerationContext", "bind_generation", "current"]


@dataclass(frozen=True, slots=True)
class GenerationContext:
    generation: int
    conversation: int


_current: ContextVar[GenerationContext | None] = ContextVar("chat_log_context", default=None)


def bind_generation(generation_pk: int, conversation_pk: int) -> None:
    """Tag every line logged from now on in the calling task (and what it starts) with these."""
    _current.set(GenerationContext(generation_pk, conversation_pk))


def current() -> GenerationContext | None:
    return _current.get()


class ContextFilter(logging.Filter):
    """Adds the bound generation's fields to each record; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get()
        if context is None:
            record.generation = record.conversation = None
            record.context = ""
        else:
            record.generation, record.conversation = context.generation, context.conversation
            record.context = (
                f" [generation={context.generation} conversation={context.conversation}]"
            )
        return True
