"""Who sees an assistant or a prompt (`SharedOrOwn`): its owner; or, for one an admin shared (no
owner), everyone when it names no groups, else the members of those groups. A user's own comes
before the shared ones of the same name, and only its owner may change or delete it: the shared
ones are the admin's, in the Django admin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatapp.access.shared_or_own import visible_to
from chatapp.assistants.models import Assistant, Prompt

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import QuerySet


def visible[Shared: (Assistant, Prompt)](model: type[Shared], user: User) -> QuerySet[Shared]:
    """The rows of `model` that `user` may use: their own and those shared with them."""
    pks = model.objects.filter(visible_to(user)).values("pk")
    # Through the pks: a user in two of a row's groups would otherwise get it twice.
    return model.objects.filter(pk__in=pks).order_by("name", "owner", "pk")


def own[Shared: (Assistant, Prompt)](model: type[Shared], user: User) -> QuerySet[Shared]:
    """The rows of `model` that `user` may change and delete: their own."""
    return model.objects.filter(owner=user).order_by("name", "pk")
