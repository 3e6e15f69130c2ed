"""`AuthenticatedRequest`: a request as our views receive it, for their annotations.

It exists for the type checker only: `login_required` has set `user` and django-htmx's
middleware `htmx`. Every view module names it from here, at the root below all of them (the
views of `read_aloud` too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from django.contrib.auth.models import User
    from django.http import HttpRequest
    from django_htmx.middleware import HtmxDetails

    class AuthenticatedRequest(HttpRequest):
        """A request as `login_required` and django-htmx's middleware hand it to our views."""

        user: User
        auser: Callable[[], Awaitable[User]]
        htmx: HtmxDetails
