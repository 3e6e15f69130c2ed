"""Feedback on answers: a thumbs up or down, and an optional comment, one per user and answer.

What a person thought of an answer, kept with its generation (`Feedback`), so the cost history
can be read by it (`costs.admin.generations.FeedbackGiven`). Giving the rating already given takes
it back (the buttons toggle, as a pressed button does); a comment is kept only with a rating.
"""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest

from chatapp.conversations.models import Message
from chatapp.costs.models import Feedback, Generation

# Control characters other than line breaks and tabs: PostgreSQL cannot store NUL, and the
# others have no place in a comment.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
RATINGS = frozenset(Feedback.Rating.values)


def comment_text(text: str) -> str:
    """A comment as kept: control characters dropped, trimmed, at most `MAX_COMMENT` long."""
    return _CONTROLS.sub("", text).strip()[: Feedback.MAX_COMMENT]


def can_rate(message: Message) -> bool:
    """Whether an answer takes feedback: one that has ended, with a generation of its own, and
    that the model wrote something in. A request refused or failed before a word came (a limit,
    a gateway's error) rates no model: a thumb on it would count against one in the admin."""
    generation = getattr(message, "generation", None)
    return (
        message.role == Message.Role.ASSISTANT
        and generation is not None
        and not generation.is_running
        and bool(message.content.strip() or message.attachments or message.tool_calls)
    )


def give(user: Any, generation: Generation, rating: str, comment: str | None) -> Feedback | None:
    """Set `user`'s feedback on `generation`: `rating` "" takes it back; `comment` None keeps
    the comment there is. The feedback now, or None."""
    if not rating:
        Feedback.objects.filter(generation=generation, user=user).delete()
        return None
    if rating not in RATINGS:
        raise ValueError(f"not a rating: {rating!r}")
    fields: dict[str, str] = {"rating": rating}
    if comment is not None:
        fields["comment"] = comment_text(comment)
    feedback, _ = Feedback.objects.update_or_create(
        generation=generation, user=user, defaults=fields
    )
    return feedback


_CACHE = "_chat_feedback"


def given(request: HttpRequest, message: Message) -> Feedback | None:
    """The signed-in user's feedback on `message`, for a page showing many answers: the first
    call reads all of theirs in the answer's conversation, once per request."""
    generation = getattr(message, "generation", None)
    if generation is None or not request.user.is_authenticated:
        return None
    cache: dict[int, dict[int, Feedback]] = request.__dict__.setdefault(_CACHE, {})
    found = cache.get(message.conversation_id)
    if found is None:
        rows = Feedback.objects.filter(
            user=request.user, generation__conversation_id=message.conversation_id
        )
        found = cache[message.conversation_id] = {row.generation_id: row for row in rows}
    return found.get(generation.pk)


def forget(request: HttpRequest) -> None:
    """Drop what `given` read (after a change in this request)."""
    request.__dict__.pop(_CACHE, None)
