"""Our own middleware: `NoStore` and `RequestMemo`.

`NoStore` is ours: every response a view makes is the user's (a signed-in page, a download of
their data, the sign-in form with its CSRF token), so none is kept by the browser's cache or a
proxy's (`Cache-Control: no-store`; `private` still lets the browser keep it on disk, readable
after sign-out), unless the view marked it `public`. Static files are served before Django's
middleware and keep their own caching.

`RequestMemo` opens `chatapp.request_memo`'s memo for the request (and closes it after), on the
event loop under ASGI: no thread hop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction, markcoroutinefunction

from django.http import HttpRequest, HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

from chatapp import request_memo
from chatapp.patches.inline_middleware import InlineHooks


class NoStore(InlineHooks, MiddlewareMixin):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if "public" not in response.get("Cache-Control", ""):
            response["Cache-Control"] = "no-store"
        return response


class RequestMemo:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], object]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> object:
        if self.is_async:
            return self._acall(request)
        token = request_memo.begin()
        try:
            return self.get_response(request)
        finally:
            request_memo.end(token)

    async def _acall(self, request: HttpRequest) -> object:
        token = request_memo.begin()
        try:
            get_response: Callable[[HttpRequest], Awaitable[object]]
            get_response = self.get_response  # type: ignore[assignment]
            return await get_response(request)
        finally:
            request_memo.end(token)


def sandboxed[R: HttpResponseBase](response: R) -> R:
    """`response`, whose bytes are the user's or a model's (a file, an export, the text as
    written), marked never to be run as a page of our origin: no type sniffing, and a CSP that
    allows nothing and sandboxes it. One place for the pair, which every such view sets."""
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
