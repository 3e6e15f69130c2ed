"""Password checks, limited per account and per client address: one limiter for every form that
checks a password (the app's sign-in, the admin's, the admin's password change, a user's own),
and sign-ups per client address on the same counters (`sign_up_window`).

Failed checks are counted in Django's cache (Redis when `REDIS_URL` is set, so every server
process sees the same counts) in fixed windows: an account's or an address's first failure opens
a window of `CHAT_LOGIN_WINDOW` seconds, and once `CHAT_LOGIN_FAILURES_PER_ACCOUNT` (or
`..._PER_ADDRESS`) failures fall in it, checks for that account (or from that address) are
refused, the right password included, until it ends: otherwise the limit would only slow a guesser
down, not stop one. A success clears its account's count (not its address's: one good password
must not reset a guesser's budget for every other account).

Two decisions make the limit one that cannot be walked around:

- An account is keyed by the name `authenticate` looks up, not by what was typed: the sign-in
  field's cleaning (strip, NFKC), the user model's `normalize_username`, then `casefold`, so
  alice in fullwidth letters and `ªlice` (NFKC: `alice`) count as alice. `ModelBackend` matches
  names exactly; the case fold merges more spellings than sign in (`ALICE`), which costs nothing
  (anyone can lock alice out by typing `alice`) and holds on a database that ignores case.
- The address is decided here, from `CHAT_TRUSTED_PROXIES`, the number of proxies in front of
  the app: 0, the peer's; N, the Nth `X-Forwarded-For` entry from the right, the one the
  outermost trusted proxy wrote. What a client put to the left of it is never read, so a forged
  header changes nothing. (Daphne's `--proxy-headers` takes the leftmost entry, which a client
  writes: the shipped deploy files no longer use it.) An IPv6 address counts by its /64, the
  least a host is given: one host has billions of addresses to rotate through within it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm, AdminPasswordChangeForm
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, UsernameField
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest

TOO_MANY = "too_many_attempts"  # the ValidationError's code


@dataclass(frozen=True, slots=True)
class Window:
    """One counter: its cache key and how many failures it allows."""

    key: str
    limit: int

    def blocked_for(self, now: float) -> float:
        """Seconds until this counter allows attempts again (0: it allows them now)."""
        values = cache.get_many([self.key, self.key + ":opened"])
        count: int = values.get(self.key, 0)
        opened: float = values.get(self.key + ":opened", now)
        if count < self.limit:
            return 0.0
        return max(0.0, opened + settings.CHAT_LOGIN_WINDOW - now)

    def record_failure(self, now: float) -> None:
        timeout = settings.CHAT_LOGIN_WINDOW
        cache.add(self.key + ":opened", now, timeout)
        cache.add(self.key, 0, timeout)
        try:
            cache.incr(self.key)
        except ValueError:  # expired between the two calls
            cache.set(self.key, 1, timeout)

    def clear(self) -> None:
        cache.delete_many([self.key, self.key + ":opened"])


def account_name(typed: str) -> str:
    """The account a typed username signs in as, as the counters know it (see the docstring)."""
    model = get_user_model()
    longest = getattr(model._meta.get_field(model.USERNAME_FIELD), "max_length", None) or 254
    cleaned = UsernameField(max_length=longest).to_python(typed)
    return str(model.normalize_username(cleaned)).casefold()


def client_address(request: HttpRequest | None) -> str:
    """The client's address: the peer's, or with `CHAT_TRUSTED_PROXIES` = N the address the
    outermost of those N proxies saw (each appends its peer to `X-Forwarded-For`)."""
    if request is None:
        return ""
    peer = str(request.META.get("REMOTE_ADDR", ""))
    hops: int = settings.CHAT_TRUSTED_PROXIES
    if hops <= 0:
        return peer
    # Several X-Forwarded-For headers arrive joined by commas, in order.
    header = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
    forwarded = [entry.strip() for entry in header.split(",") if entry.strip()]
    if not forwarded:
        return peer  # not through the proxies (a health check on loopback)
    # Fewer entries than hops: every entry there is one a trusted proxy wrote; take the outermost.
    return forwarded[-min(hops, len(forwarded))]


def address_key(address: str) -> str:
    """What the address counter counts: an IPv4 address (IPv4-mapped IPv6 included), an IPv6
    address's /64 network, or the text as it came (not an address: counted as it is)."""
    try:
        parsed = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


def windows(username: str, address: str | None) -> list[Window]:
    """The account's counter, and the address's unless `address` is None."""
    account = hashlib.sha256(account_name(username).encode()).hexdigest()
    found = [Window(f"login-failures:account:{account}", settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT)]
    if address is not None:
        peer = hashlib.sha256(address_key(address).encode()).hexdigest()
        found.append(
            Window(f"login-failures:address:{peer}", settings.CHAT_LOGIN_FAILURES_PER_ADDRESS)
        )
    return found


def sign_up_window(address: str) -> Window:
    """The address's sign-up counter: accounts made and names found taken, `..._PER_ACCOUNT` of
    them a window (one person makes one account; a client asking name after name is looking for
    the accounts that exist)."""
    peer = hashlib.sha256(address_key(address).encode()).hexdigest()
    return Window(f"sign-ups:address:{peer}", settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT)


def too_many(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"Too many attempts, try again in {minutes} minute{'s' if minutes != 1 else ''}."


@dataclass(slots=True)
class Check:
    passed: bool = False
    """Set by the caller once the password matched (a form with a field missing checks none)."""


@contextmanager
def limited(username: str, address: str | None) -> Iterator[Check]:
    """One password check of `username` (from `address`; None: the account alone counts):
    refused with a `TOO_MANY` ValidationError while a counter is full; a ValidationError from the
    check counts as a failure; a check marked `passed` clears the account's count."""
    counters = windows(username, address)
    now = time.time()
    wait = max(counter.blocked_for(now) for counter in counters)
    if wait:
        raise ValidationError(too_many(wait), code=TOO_MANY)
    check = Check()
    try:
        yield check
    except ValidationError:
        for counter in counters:
            counter.record_failure(now)
        raise
    if check.passed:
        counters[0].clear()


class LimitedAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing an account or address with too many recent failures."""

    throttled: str = ""  # the refusal, shown by the template instead of "didn't match"

    def clean(self) -> dict[str, Any]:
        try:
            with limited(self.data.get("username", ""), client_address(self.request)) as check:
                cleaned = super().clean()
                check.passed = self.user_cache is not None
                return cleaned
        except ValidationError as exc:
            if exc.code == TOO_MANY:
                self.throttled = exc.messages[0]
            raise


class LimitedAdminAuthenticationForm(LimitedAuthenticationForm, AdminAuthenticationForm):
    """The admin's sign-in form (staff only), on the same counters."""


class LimitedAdminPasswordChangeForm(AdminPasswordChangeForm):
    """The admin's password change: a wrong old password counts against the account (the form
    is not given the request; whoever uses it is signed in as that account)."""

    def clean_old_password(self) -> str:
        with limited(self.user.get_username(), None) as check:
            old: str = super().clean_old_password()
            check.passed = True
        return old


class LimitedPasswordChangeForm(PasswordChangeForm):
    """A signed-in user's own password change (chatapp/identity/password.py): a wrong old
    password counts against the account, so a borrowed session cannot guess it here."""

    def clean_old_password(self) -> str:
        with limited(self.user.get_username(), None) as check:
            old: str = super().clean_old_password()
            check.passed = True
        return old
