"""Sign-in attempts, limited per account and per client address.

Failed sign-ins are counted in Django's cache (Redis when `REDIS_URL` is set, so every server
process sees the same counts) in fixed windows: an account's or an address's first failure opens
a window of `CHAT_LOGIN_WINDOW` seconds, and once `CHAT_LOGIN_FAILURES_PER_ACCOUNT` (or
`..._PER_ADDRESS`) failures fall in it, sign-ins for that account (or from that address) are
refused, the right password included, until it ends: otherwise the limit would only slow a guesser
down, not stop one. A successful sign-in clears its account's count (not its address's: one good
password must not reset a guesser's budget for every other account).

The address is the peer's (`REMOTE_ADDR`); behind a reverse proxy, run Daphne with
`--proxy-headers` so that it is the browser's, not the proxy's.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.core.exceptions import ValidationError


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


def windows(username: str, address: str) -> tuple[Window, Window]:
    """The account's counter and the address's."""
    account = hashlib.sha256(username.strip().casefold().encode()).hexdigest()
    return (
        Window(f"login-failures:account:{account}", settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT),
        Window(f"login-failures:address:{address}", settings.CHAT_LOGIN_FAILURES_PER_ADDRESS),
    )


def too_many(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"Too many attempts, try again in {minutes} minute{'s' if minutes != 1 else ''}."


class LimitedAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing an account or address with too many recent failures."""

    throttled: str = ""  # the refusal, shown by the template instead of "didn't match"

    def clean(self) -> dict[str, Any]:
        address = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        account, peer = windows(self.data.get("username", ""), address)
        now = time.time()
        wait = max(account.blocked_for(now), peer.blocked_for(now))
        if wait:
            self.throttled = too_many(wait)
            raise ValidationError(self.throttled, code="too_many_attempts")
        try:
            cleaned = super().clean()
        except ValidationError:
            account.record_failure(now)
            peer.record_failure(now)
            raise
        account.clear()
        return cleaned


login = LoginView.as_view(authentication_form=LimitedAuthenticationForm)
