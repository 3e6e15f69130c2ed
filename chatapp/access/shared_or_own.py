"""What a user keeps for themselves or an admin shares: assistants, prompts, knowledge
collections. The abstract model and the one rule of who sees a row live here, below both the
chat app's models and `chatapp/knowledge`, so each shares by the same rule."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class SharedOrOwn(models.Model):
    """Something a user keeps for themselves (`owner`), or an admin shares (no owner) with
    everyone or, when `groups` names some, with their members only (`visible_to`)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: shared by an admin (with the groups below, or with everyone).",
    )
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="+",
        help_text="Shared ones only: the groups whose members see it; none: everyone.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def visible_to(user: User) -> Q:
    """The condition on a `SharedOrOwn` model's rows that `user` may use: their own, and those
    shared with everyone or with a group they are in. A user in two of a row's groups matches it
    twice: filter by the pks of the rows this selects (`visible`'s way), or use `.distinct()`."""
    groups = user.groups.values("pk")
    shared = Q(owner__isnull=True) & (Q(groups__isnull=True) | Q(groups__in=groups))
    return Q(owner=user) | shared
