"""Usernames: one rule for every account the app makes, at the sign-up page, by single sign-on,
and in the admin.

A username is trimmed and NFKC-normalised, as Django's sign-in form (`UsernameField`) reads what
is typed, so fullwidth or compatibility letters become the plain ones and the form finds the
account. It must then pass the user model's own validators: letters, digits and `@ . + - _`
(`UnicodeUsernameValidator`, which leaves out spaces, other punctuation and the format
characters, the zero-width ones and the right-to-left override U+202E among them), 150 characters
at most. A provider's
claim that fails them is not used (`for_claims` falls back to the next claim).

Names that differ only by case are one name: "ALICE" is taken while alice exists, here (`taken`)
and in the database (migration 0027's unique index on `UPPER(username)`), so that two sign-ups
racing cannot both have it. SQLite's `UPPER` folds ASCII letters alone, so there the index holds
"Älice" beside "älice" and only `taken` refuses it. The refusal says only that the name cannot
be had, not which account holds it or in what spelling.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models.functions import Length

LONGEST = 150  # the user model's username max_length
TAKEN = "This username is not available. Choose another."
# The claims a provider's new subject is named by, in order of preference.
CLAIMS = ("preferred_username", "email", "sub")


def valid(raw: str) -> str:
    """`raw` normalised, or a ValidationError saying why it cannot be a username."""
    name = unicodedata.normalize("NFKC", raw.strip())
    if not name:
        raise ValidationError("A username is needed.", code="required")
    User._meta.get_field("username").run_validators(name)
    return name


def taken(name: str, but: int | None = None) -> bool:
    """Whether an account (other than the one with primary key `but`) has `name` in any case."""
    others = User.objects.exclude(pk=but) if but is not None else User.objects.all()
    if others.filter(username__iexact=name).exists():
        return True
    if name.isascii():
        return False
    # SQLite folds ASCII letters alone (PostgreSQL folds them all): a name with others is also
    # compared here, with the names of its length.
    folded = name.casefold()
    same_length = others.annotate(length=Length("username")).filter(length=len(name))
    return any(
        other.casefold() == folded
        for other in same_length.values_list("username", flat=True).iterator()
    )


def check(raw: str, but: int | None = None) -> str:
    """`raw` normalised, or a ValidationError: not a username, or one another account has."""
    name = valid(raw)
    if taken(name, but):
        raise ValidationError(TAKEN, code="taken")
    return name


def for_claims(claims: dict[str, Any]) -> str:
    """A free username for a provider's new subject: the first of its claims that is a valid
    username ("user" if none is), with "-2", "-3" added while another account has it."""
    wanted = "user"
    for claim in CLAIMS:
        try:
            wanted = valid(str(claims.get(claim) or ""))
            break
        except ValidationError:
            continue
    candidate, number = wanted, 1
    while taken(candidate):
        number += 1
        suffix = f"-{number}"
        candidate = wanted[: LONGEST - len(suffix)] + suffix
    return candidate
