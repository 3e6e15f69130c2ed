"""Which account a provider's subject signs in as, and what of its claims the account keeps.

A subject is linked to one account by `ProviderIdentity` at its first sign-in, and found by that
link afterwards. E-mail is not an identity: a provider may let users set an address they do not
own, and an address moves between people. So an existing account, a local one made before single
sign-on was turned on included, is never taken over by a matching e-mail unless the admin sets
`CHAT_OIDC_LINK_BY_EMAIL`. Even then the provider must say it verified the address
(`email_verified`), and the account must be one an admin vouches for (`linkable`): active, not
staff, not linked yet, and not self-signed-up (`SelfSignUp`), since anyone may sign up with a
stranger's address and wait for that stranger's first sign-in to hand over the account whose
password they hold. Otherwise the subject gets an account of its own; an admin who wants the old
one kept can link it in the admin (Single sign-on identities) before its owner signs in.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from chatapp.identity import usernames
from chatapp.identity.models import ProviderIdentity

NAME_LENGTH = 150  # Django's first_name and last_name max length


def account_for(issuer: str, claims: dict[str, Any]) -> User:
    """The account the subject in `claims` signs in as: linked, linked by e-mail, or new."""
    subject = str(claims["sub"])
    identity = (
        ProviderIdentity.objects.select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is not None:
        identity.last_sign_in = timezone.now()
        identity.save(update_fields=["last_sign_in"])
        return identity.user
    user = by_email(claims) if settings.CHAT_OIDC_LINK_BY_EMAIL else None
    if user is None:
        user = User.objects.create_user(username=usernames.for_claims(claims))
        user.set_unusable_password()
        user.save(update_fields=["password"])
    ProviderIdentity.objects.create(
        user=user, issuer=issuer, subject=subject, last_sign_in=timezone.now()
    )
    return user


def by_email(claims: dict[str, Any]) -> User | None:
    """The one linkable account with the claims' e-mail, if the provider verified it."""
    email = str(claims.get("email") or "")
    if not email or claims.get("email_verified") is not True:
        return None
    found = list(linkable().filter(email__iexact=email)[:2])
    return found[0] if len(found) == 1 else None


def linkable() -> QuerySet[User]:
    """The accounts an e-mail may link to: an admin made them (not a sign-up, which may carry
    anyone's address), they are active (not waiting, not deactivated), hold no staff or
    superuser rights (whose takeover would be the worst) and no provider's subject yet."""
    return User.objects.filter(
        is_active=True,
        is_staff=False,
        is_superuser=False,
        provider_identities__isnull=True,
        self_sign_up__isnull=True,
        pending_approval__isnull=True,
    ).distinct()


def update_profile(user: User, claims: dict[str, Any]) -> None:
    """Name and e-mail as the provider has them now (an empty claim leaves the field as it is),
    without control characters or those that turn the text's direction (`shown`)."""
    values = {
        "first_name": shown(claims.get("given_name") or claims.get("name"))[:NAME_LENGTH],
        "last_name": shown(claims.get("family_name"))[:NAME_LENGTH],
        "email": shown(claims.get("email"))[:254],
    }
    if values["first_name"] and not claims.get("given_name"):
        values["last_name"] = ""  # a full name in `name` alone: all of it is the first name
    changed = [
        field
        for field, value in values.items()
        if (value or field == "last_name") and getattr(user, field) != value
    ]
    for field in changed:
        setattr(user, field, values[field])
    if changed:
        user.save(update_fields=changed)


# Right-to-left override and its kin: in the admin's lists they would make "Eve" read as another
# name, or push the next column's text into this one.
DIRECTION_MARKS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def shown(claim: Any) -> str:
    """A claim as the admin's pages may show it: no control characters, no direction marks."""
    text = str(claim or "")
    return "".join(
        c for c in text if c not in DIRECTION_MARKS and unicodedata.category(c) != "Cc"
    ).strip()
