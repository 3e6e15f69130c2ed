"""Groups from the provider's groups claim, kept in step at each sign-in.

A group named in the claim is a `django.contrib.auth` Group of the same name (made on first
sight). The user's memberships that came from the claim are recorded (`ProviderGroupMembership`):
a sign-in adds the user to the claim's groups and takes them out of the recorded groups the claim
no longer names. A membership an admin made by hand has no record and is never removed; one the
claim also names becomes the provider's from then on.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, User

from chatapp.identity.models import ProviderGroupMembership

NAME_LENGTH = 150  # Group.name's max_length
MOST = 500  # groups taken from one claim (a claim is the provider's, but bounded all the same)


def names_from(claim: Any) -> list[str]:
    """The group names in a claim: a list of strings (Keycloak, Okta, Authentik, Entra ID's
    object IDs), or one string; anything else is no groups."""
    if isinstance(claim, str):
        claim = [claim]
    if not isinstance(claim, list):
        return []
    names = []
    for item in claim[:MOST]:
        if isinstance(item, str) and item.strip():
            names.append(item.strip()[:NAME_LENGTH])
    return list(dict.fromkeys(names))


def sync(user: User, names: list[str]) -> None:
    groups = []
    for name in names:
        group, _ = Group.objects.get_or_create(name=name)
        groups.append(group)
    wanted = {group.pk for group in groups}
    recorded = set(
        ProviderGroupMembership.objects.filter(user=user).values_list("group_id", flat=True)
    )
    user.groups.add(*groups)
    ProviderGroupMembership.objects.bulk_create(
        [ProviderGroupMembership(user=user, group=g) for g in groups if g.pk not in recorded]
    )
    gone = recorded - wanted
    if gone:
        user.groups.remove(*gone)
        ProviderGroupMembership.objects.filter(user=user, group_id__in=gone).delete()
