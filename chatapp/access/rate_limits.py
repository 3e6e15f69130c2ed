"""How many answers a user may start: `CHAT_GENERATIONS_PER_MINUTE`, over send, retry, edit,
continue and Read aloud alike (each starts one generation). `turns` and `read_aloud.records` check
first, on the records thread with the rest of the turn, and a new chat's early request is not
sent past it.

The user's generations of the last minute are rows every process already shares, so the limit
holds across server processes with no counter to keep in step. One thing is counted: a send
whose upstream request leaves before its rows are written (a new chat's, a follow-up's) is
`admit`ted first, and counts among the user's answers until its row is on record. Checked
against the rows alone, 45 sends at once all passed the check before any was written, the
gateway got 45 requests (each a paid prompt), and only the first 30 were recorded. Admissions
are per process: the shipped nginx sends a user's requests to one process (`deploy/nginx.py`).
Chat answers, images and read alouds count (a read aloud bills like an answer: leaving them out
let a user start read alouds without end), and only the first round of a turn (a turn that calls
tools makes more, which the user did not ask for one by one).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from chatapp.costs.models import Generation
from chatapp.errors import ChatAppError

if TYPE_CHECKING:
    from django.contrib.auth.models import User

WINDOW = timedelta(minutes=1)
STARTED_BY_USER = [
    Generation.Kind.CHAT,
    Generation.Kind.IMAGE,
    Generation.Kind.READ_ALOUD,
    Generation.Kind.TRANSCRIPTION,
]


# Admissions (`admit`) not yet released, by user; `_counted` guards it. A check and its admission
# are one step under the user's stripe of `_checking` (two sends of one user cannot both pass on
# the same count), without making every user's sends take turns.
_held: dict[int, list[Admission]] = {}
_counted = threading.Lock()
_checking = tuple(threading.Lock() for _ in range(64))


@dataclass(eq=False, slots=True)
class Admission:
    """`answers` of a user's, counted against the limit until `release`. Their generations, once
    created (`record`), are counted as the admission, not as rows: a check that reads between
    their commit and the release counts them once."""

    user_pk: int
    answers: int
    generation_pks: list[int] = field(default_factory=list)
    at: datetime = field(default_factory=timezone.now)  # when its answers count as started

    def record(self, generation_pk: int) -> None:
        """One of its answers is a row now (in the transaction that will commit it)."""
        with _counted:
            self.generation_pks.append(generation_pk)

    def release(self) -> None:
        """Stop counting them (idempotent): their rows are committed, or will never be."""
        with _counted:
            held = _held.get(self.user_pk, [])
            if self in held:
                held.remove(self)
            if not held:
                _held.pop(self.user_pk, None)


def admit(user: User, starting: int = 1) -> Admission:
    """`check_generation_start`, then count the `starting` answers as started until the
    admission is released: for a request sent upstream before its generation is written."""
    admission = Admission(user.pk, starting)
    with _checking[user.pk % len(_checking)]:
        check_generation_start(user, starting)
        with _counted:
            _held.setdefault(user.pk, []).append(admission)
    return admission


class RateLimited(ChatAppError):
    """The user did something too often; `retry_after` is in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def check_generation_start(
    user: User, starting: int = 1, admission: Admission | None = None
) -> None:
    """`RateLimited` when `user` has started so many answers in the last minute (those admitted
    and not yet on record included, but for `admission`, the caller's own) that `starting`
    more (a comparison starts several) would pass `CHAT_GENERATIONS_PER_MINUTE`, saying when the
    next may start. Database work: called where the turn is made, not in a thread hop of its own
    (under load each hop queues behind the others)."""
    limit = settings.CHAT_GENERATIONS_PER_MINUTE
    since = timezone.now() - WINDOW
    recent = Generation.objects.filter(
        user=user, kind__in=STARTED_BY_USER, tool_round=1, started_at__gt=since
    )
    with _counted:  # before the rows: an admission released meanwhile is then counted twice
        held = [other for other in _held.get(user.pk, ()) if other is not admission]
        recorded = [pk for other in held for pk in other.generation_pks]
    rows = recent.exclude(pk__in=recorded)
    count = sum(other.answers for other in held) + rows.count()
    if count + starting <= limit:
        return
    # Every start counted, newest first: the rows', and each held admission's (its answers started
    # when it was admitted; left out, a burst of admissions said "try again in 1 s" for a minute's
    # wait). The one whose expiry leaves room for `starting` more says how long.
    index = max(0, limit - starting)
    starts = [at for other in held for at in [other.at] * other.answers]
    starts += rows.order_by("-started_at").values_list("started_at", flat=True)[: index + 1]
    starts.sort(reverse=True)
    oldest = starts[index] if index < len(starts) else None
    wait = 1.0 if oldest is None else (oldest - since).total_seconds()
    seconds = max(1, math.ceil(wait))
    if count >= limit:
        said = f"You have started {limit} answers in the last minute, the most allowed"
    else:
        said = f"{starting} answers more would pass the {limit} a minute allowed"
    raise RateLimited(f"{said}; try again in {seconds} s.", retry_after=seconds)
