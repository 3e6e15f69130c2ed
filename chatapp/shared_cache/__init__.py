"""What every page reads and only a setting changes, kept in each process under a version token.

A page showed the tools a user may choose, their group policy, the assistants and prompts they
may use and their chat defaults, each read again on every page though they change only when an
admin or the user saves one. `cached(key, compute)` keeps `compute()`'s value in this process
for as long as the token of `SharedVersion` (one row) stays the same; any change to a model
`connect_signals` watches (saved, deleted, or its groups changed) writes a new token in the same
transaction, so every process sees the change on its next request: the version is read from the
database once per request (`request_memo`), not kept. Reading it is one statement where the
facts were six. A database without the row (just made, or flushed) gets one with a new token when
it is first read, so no value is kept across a flush. A write that sends no signal (a queryset's
`update`, raw SQL, another program) must call `changed()` or give the row a new token itself.

A value here is shared by every request of the process: callers must not change it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_save

from chatapp import request_memo
from chatapp.shared_cache.models import SharedVersion

__all__ = ["cached", "changed", "connect_signals"]

# Past this many values (per-user ones: a few per user who loaded a page) the process forgets
# them all and starts again, rather than growing with the number of users.
MAX_VALUES = 10_000

_lock = threading.Lock()
_values: dict[Hashable, Any] = {}
_values_token = ""


def _token() -> str:
    return request_memo.remember("shared_cache.token", _read_token)


def _read_token() -> str:
    return SharedVersion.current()


def cached[T](key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, kept in this process until a watched model changes."""
    global _values_token
    token = _token()
    with _lock:
        if _values_token != token:
            _values.clear()
            _values_token = token
        if key in _values:
            found: T = _values[key]
            return found
    value = compute()
    with _lock:
        if _values_token == token:
            if len(_values) >= MAX_VALUES:
                _values.clear()
            _values[key] = value
    return value


def changed(**kwargs: Any) -> None:
    """A signal receiver: a watched row changed, so every process's values are old."""
    SharedVersion.objects.update_or_create(
        pk=SharedVersion.ONE, defaults={"token": uuid.uuid4().hex}
    )


def _m2m_changed(action: str, **kwargs: Any) -> None:
    if action in ("post_add", "post_remove", "post_clear"):
        changed()


def connect_signals(
    watched: Sequence[type[Model]],
    shared_with_groups: Sequence[type[Model]],
    relations: Sequence[type[Model]] = (),
) -> None:
    """Watch `watched` (saved, deleted) and who is in which group, which groups each of
    `shared_with_groups` (a model with a `groups` many-to-many) is shared with, and the
    many-to-many `relations` (their through models). The app's config names the models
    (`apps.py`): the packages that own them stand above this one."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    models: tuple[type[Model], ...] = (*watched, Group)
    for model in models:
        uid = f"chatapp.shared_cache.{model.__name__}"
        post_save.connect(changed, sender=model, dispatch_uid=uid + ".saved")
        post_delete.connect(changed, sender=model, dispatch_uid=uid + ".deleted")
    # A user deleted takes their memberships with them (no m2m signal), and SQLite may give
    # their pk to the next user made.
    post_delete.connect(
        changed, sender=get_user_model(), dispatch_uid="chatapp.shared_cache.user.deleted"
    )
    # Who is in which group, and which groups an assistant, a prompt or a server is shared with.
    throughs = [
        get_user_model().groups.through,
        *(model.groups.through for model in shared_with_groups),  # type: ignore[attr-defined]
        *relations,
    ]
    for through in throughs:
        m2m_changed.connect(
            _m2m_changed, sender=through, dispatch_uid=f"chatapp.shared_cache.{through.__name__}"
        )
