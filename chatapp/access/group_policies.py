"""What a user may use, from the policies of their groups (`GroupPolicy`): which models (in the
picker, and for a turn, checked on the server) and which tools (offered in Settings, and sent
to the model).

Patterns are `fnmatch`'s (`*`, `?`, `[...]`), matched case-sensitively, one a line. A model
pattern is matched against the model's ID (`openai/*`: those models on any gateway) and against
"gateway name:model ID" (`Numes:*`: every model of one gateway; `Numes:openai/*`), so one line
can name a model, a provider's models or a whole gateway. A tool pattern is matched against the
tool's name (`calculator`, `*`).

Several groups add up: a user may use what any of their groups' policies allows (the union).
A user in no group with a policy, and a superuser, may use everything, as before groups had
policies. The models a gateway uses on its own (a title's, Read aloud's speech model) are the
gateway's choice, not the user's, and are not checked.

Which models a user may use is decided in one place, `Access.allows_model`, and asked two ways:
`catalog_for` (the picker, the assistant form, the models to compare beside it: a list narrowed)
and `check_model` (a model a person chose, on every path that starts a generation: refused in
words). `catalog_for` is pure over the user's `Access` and the catalog, so either may be cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from chatapp import request_memo, shared_cache
from chatapp.access.models import GroupPolicy
from chatapp.errors import ChatAppError
from chatapp.gateways.catalog import narrowed

if TYPE_CHECKING:
    from collections.abc import Iterable

    from chatapp.gateways.catalog import GatewayModels

__all__ = [
    "EVERYTHING",
    "Access",
    "ModelNotAllowed",
    "access_for",
    "catalog_for",
    "check_model",
    "patterns",
]


class ModelNotAllowed(ChatAppError):
    """The user's groups do not let them use the model asked for; the message says so."""


def patterns(text: str) -> tuple[str, ...]:
    """A policy field's patterns: its non-blank lines, stripped."""
    return tuple(line.strip() for line in text.replace("\r", "\n").split("\n") if line.strip())


def _matches(found: tuple[str, ...], names: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in found for name in names)


@dataclass(frozen=True, slots=True)
class Access:
    """What one user may use: the patterns of all their groups' policies together, None for
    everything (no policy applies)."""

    model_patterns: tuple[str, ...] | None
    tool_patterns: tuple[str, ...] | None
    groups: tuple[str, ...] = ()
    """The names of the groups whose policies these are (for the refusal's words)."""

    @property
    def restricted(self) -> bool:
        return self.model_patterns is not None

    def allows_model(self, gateway_name: str, model: str) -> bool:
        if self.model_patterns is None:
            return True
        return _matches(self.model_patterns, (model, f"{gateway_name}:{model}"))

    def allows_tool(self, name: str) -> bool:
        return self.tool_patterns is None or _matches(self.tool_patterns, (name,))


EVERYTHING = Access(None, None)


def access_for(user_pk: int | None) -> Access:
    """What the user `user_pk` may use (None, or a user since deleted: everything). One query,
    kept until a policy or a membership changes (`shared_cache`), and once per request
    (`request_memo`): a page asks for it for the picker and for the tools."""
    if user_pk is None:
        return EVERYTHING
    key = ("access_for", user_pk)
    return request_memo.remember(key, lambda: shared_cache.cached(key, lambda: _resolved(user_pk)))


def _resolved(user_pk: int) -> Access:
    policies = list(
        # One filter call: both conditions are on the same membership's user.
        GroupPolicy.objects.filter(group__user=user_pk, group__user__is_superuser=False)
        .order_by("group__name")
        .values_list("group__name", "model_patterns", "tool_patterns")
    )
    if not policies:
        return EVERYTHING
    return Access(
        model_patterns=tuple(p for _, models, _ in policies for p in patterns(models)),
        tool_patterns=tuple(p for _, _, tools in policies for p in patterns(tools)),
        groups=tuple(name for name, _, _ in policies),
    )


def catalog_for(access: Access, found: list[GatewayModels]) -> list[GatewayModels]:
    """The models of the catalog `found` (`gateways.catalog.catalog`) a user with `access` may
    use: all of it for an unrestricted user, else only what `access.allows_model`."""
    return narrowed(found, access.allows_model) if access.restricted else found


def check_model(user_pk: int | None, gateway_name: str, model: str) -> None:
    """`ModelNotAllowed`, in words, when `user_pk` may not use `model` on `gateway_name`."""
    access = access_for(user_pk)
    if access.allows_model(gateway_name, model):
        return
    named = " and ".join(", ".join(access.groups).rsplit(", ", 1))
    plural = "groups" if len(access.groups) > 1 else "group"
    raise ModelNotAllowed(
        f"Your {plural} ({named[:300]}) may not use {model[:200]!r} on {gateway_name}: "
        "choose another model."
    )
