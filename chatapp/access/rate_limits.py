"""How many answers a user may start: `CHAT_GENERATIONS_PER_MINUTE`, over send, retry, edit,
continue and Read aloud alike (each starts one generation). `turns` and `read_aloud.records` check
first, on the records thread with the rest of the turn, and a new chat's early request is not
sent past it.

Nothing is counted: the user's generations of the last minute are rows every process already
shares, so the limit holds across server processes with no counter to keep in step. Chat answers,
images and read alouds count (a read aloud bills like an answer: leaving them out let a user
start read alouds without end), and only the first round of a turn (a turn that calls tools makes
more, which the user did not ask for one by one).
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from chatapp.errors import ChatAppError
from chatapp.models import Generation

if TYPE_CHECKING:
    from django.contrib.auth.models import User

WINDOW = timedelta(minutes=1)
STARTED_BY_USER = [Generation.Kind.CHAT, Generation.Kind.IMAGE, Generation.Kind.READ_ALOUD]


class RateLimited(ChatAppError):
    """The user did something too often; `retry_after` is in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def check_generation_start(user: User, starting: int = 1) -> None:
    """`RateLimited` when `user` has started so many answers in the last minute that `starting`
    more (a comparison starts several) would pass `CHAT_GENERATIONS_PER_MINUTE`, saying when the
    next may start. Database work: called where the turn is made, not in a thread hop of its own
    (under load each hop queues behind the others)."""
    limit = settings.CHAT_GENERATIONS_PER_MINUTE
    since = timezone.now() - WINDOW
    recent = Generation.objects.filter(
        user=user, kind__in=STARTED_BY_USER, tool_round=1, started_at__gt=since
    )
    count = recent.count()
    if count + starting <= limit:
        return
    # The newest start whose expiry leaves room for `starting` more.
    index = max(0, limit - starting)
    oldest = (
        recent.order_by("-started_at")
        .values_list("started_at", flat=True)[index : index + 1]
        .first()
    )
    wait = 1.0 if oldest is None else (oldest - since).total_seconds()
    seconds = max(1, math.ceil(wait))
    if count >= limit:
        said = f"You have started {limit} answers in the last minute, the most allowed"
    else:
        said = f"{starting} answers more would pass the {limit} a minute allowed"
    raise RateLimited(f"{said}; try again in {seconds} s.", retry_after=seconds)
