"""Django's own middleware, run on the event loop where it does no I/O.

Under ASGI, Django runs each hook of a `MiddlewareMixin` middleware in a thread
(`sync_to_async`), whatever it does: with our nine that was a dozen thread hops per request, each
a wait for the GIL among every other request's threads, and under a burst of 50 new chats the
requests spent 300-550 ms in them before reaching the view. The hooks below are pure (they set
headers, check a token, put lazy objects on the request), so they run inline. The two that can
reach the database do so only on a path that is checked first and then taken in a thread as
before: saving a modified session, and storing messages (which may overflow into the session).
Django's async-safety check stays on, so a hook that did touch the database here would fail
loudly, not block the loop.

`GZip` compresses on the loop too: a page is a few hundred kilobytes at most, a millisecond or
two of zlib, less than the thread hop. Streaming responses (Read aloud's audio, downloads) are
left as they are, so that each piece is sent as it comes, as Django's would not.

Each class pins Django internals it relies on (`MiddlewareMixin.__acall__`'s shape); the canary
tests in `tests/chatapp/patches/test_patches.py` fail loudly when an upgrade changes them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.csp import ContentSecurityPolicyMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.middleware.gzip import GZipMiddleware
from django.middleware.security import SecurityMiddleware

type View = Callable[..., Any]


class InlineHooks:
    """`MiddlewareMixin.__acall__` with the hooks called inline, unless `needs_thread` says the
    response hook may do I/O for this request."""

    def needs_thread(self, request: HttpRequest) -> bool:
        return False

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        process_request = getattr(self, "process_request", None)
        if process_request is not None:
            response = process_request(request)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]
        get_response = self.get_response  # type: ignore[attr-defined]  # MiddlewareMixin's
        response = response or await get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self.needs_thread(request):
                response = await sync_to_async(process_response, thread_sensitive=True)(
                    request, response
                )
            else:
                response = process_response(request, response)
        return response


class GZip(InlineHooks, GZipMiddleware):
    """Django's, with its BREACH mitigation (random bytes in the gzip header); not for a
    streaming response, nor a byte range (its `Content-Range` counts the uncompressed bytes)."""

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if response.streaming or response.status_code == 206:
            return response
        return super().process_response(request, response)


class Security(InlineHooks, SecurityMiddleware):
    pass


class ContentSecurityPolicy(InlineHooks, ContentSecurityPolicyMiddleware):
    pass


class Session(InlineHooks, SessionMiddleware):
    def needs_thread(self, request: HttpRequest) -> bool:
        # Exactly when Django's `process_response` saves; `is_empty` reads no store.
        session = getattr(request, "session", None)
        if session is None:
            return False
        saves = session.modified or settings.SESSION_SAVE_EVERY_REQUEST
        return bool(saves and not session.is_empty())


class Common(InlineHooks, CommonMiddleware):
    pass


class Csrf(InlineHooks, CsrfViewMiddleware):
    async def process_view(  # type: ignore[override]
        self, request: HttpRequest, callback: View, args: Any, kwargs: Any
    ) -> HttpResponseBase | None:
        # The token is checked against the cookie (not the session): no I/O.
        return super().process_view(request, callback, args, kwargs)


class Authentication(InlineHooks, AuthenticationMiddleware):
    """Puts a lazy user on the request; `request.auser()` loads it asynchronously. Django caches
    the two apart (`_acached_user`, `_cached_user`), so an async view (its `login_required`
    awaits `auser()`) that then reads `request.user` in its thread loaded the user twice: the
    user `auser()` loads is the sync one's too."""

    def process_request(self, request: HttpRequest) -> None:
        super().process_request(request)
        load = request.auser

        async def auser() -> Any:
            user = await load()
            if not hasattr(request, "_cached_user"):
                request._cached_user = user  # type: ignore[attr-defined]
            return user

        request.auser = auser


class Messages(InlineHooks, MessageMiddleware):
    def needs_thread(self, request: HttpRequest) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and bool(storage.used or storage.added_new)


class XFrameOptions(InlineHooks, XFrameOptionsMiddleware):
    pass
