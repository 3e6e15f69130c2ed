"""Keeping many conversations: pins, the archive and folders, one conversation or several at once.

Every change here is an `update()` of the user's own rows, never a `save()`: pinning, filing or
archiving a conversation is not activity, so its `updated_at` (its place in the sidebar's date
groups) stays. A key that is not the user's matches nothing, so another user's conversation or
folder is never touched and is told apart from a missing one by nobody. Deleting a folder keeps its
conversations (`Conversation.folder` is `SET_NULL`); archiving keeps a conversation whole, costs
and all, and restoring brings it back where it was (pinned, in its folder).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db.models import QuerySet
from django.utils import timezone

from chatapp.conversations import user_text
from chatapp.conversations.models import Conversation, Folder

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = [
    "MAX_FOLDERS",
    "MAX_SELECTED",
    "FolderRefused",
    "create_folder",
    "delete_folder",
    "folder_name",
    "move",
    "owned",
    "rename_folder",
    "selected_keys",
    "set_archived",
    "set_collapsed",
    "set_pinned",
]

MAX_FOLDERS = 100
MAX_SELECTED = 500  # conversations one bulk action takes
FOLDER_NAME = 100  # characters, as `Folder.name`


class FolderRefused(ValueError):
    """A folder name that cannot be used, in words for the user."""


def owned(user: User, pks: Iterable[int]) -> QuerySet[Conversation]:
    return Conversation.objects.filter(user=user, pk__in=list(pks))


def selected_keys(values: Iterable[str]) -> list[int]:
    """The conversation keys of a bulk form's checked boxes; anything not a key is dropped."""
    keys = {int(value) for value in values if value.isdigit() and len(value) < 19}
    return sorted(keys)[:MAX_SELECTED]


def set_pinned(user: User, pk: int, pinned: bool) -> int:
    """Pin (listed first) or unpin one conversation; the number changed (0: not the user's)."""
    return owned(user, [pk]).update(pinned_at=timezone.now() if pinned else None)


def set_archived(user: User, pks: Iterable[int], archived: bool) -> int:
    """Archive (out of the sidebar) or restore conversations; the number changed."""
    rows = owned(user, pks)
    if archived:
        return rows.filter(archived_at__isnull=True).update(archived_at=timezone.now())
    return rows.update(archived_at=None)


def move(user: User, pk: int, folder_pk: int | None) -> int:
    """File one conversation in the user's folder `folder_pk`, or in none; 0 when either is not
    the user's."""
    if folder_pk is not None and not Folder.objects.filter(user=user, pk=folder_pk).exists():
        return 0
    return owned(user, [pk]).update(folder_id=folder_pk)


def folder_name(text: str) -> str:
    """A folder's name from what was typed: one line, at most `FOLDER_NAME` characters."""
    return user_text.one_line(text)[:FOLDER_NAME].strip()


def create_folder(user: User, text: str) -> Folder:
    name = _checked_name(user, text, None)
    if Folder.objects.filter(user=user).count() >= MAX_FOLDERS:
        raise FolderRefused(f"You have {MAX_FOLDERS} folders, the most there can be.")
    return Folder.objects.create(user=user, name=name)


def rename_folder(user: User, pk: int, text: str) -> int:
    name = _checked_name(user, text, pk)
    return Folder.objects.filter(user=user, pk=pk).update(name=name)


def delete_folder(user: User, pk: int) -> int:
    """Delete the user's folder `pk`; its conversations stay, in no folder."""
    deleted, _ = Folder.objects.filter(user=user, pk=pk).delete()
    return deleted


def set_collapsed(user: User, pk: int, collapsed: bool) -> int:
    return Folder.objects.filter(user=user, pk=pk).update(collapsed=collapsed)


def _checked_name(user: User, text: str, renamed_pk: int | None) -> str:
    name = folder_name(text)
    if not name:
        raise FolderRefused("A folder needs a name.")
    same = Folder.objects.filter(user=user, name__iexact=name)
    if renamed_pk is not None:
        same = same.exclude(pk=renamed_pk)
    if same.exists():
        raise FolderRefused(f"There is a folder named “{name}” already.")
    return name
