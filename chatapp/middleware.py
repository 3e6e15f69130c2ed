"""Our own middleware: `NoStore`.

`NoStore` is ours: every response a view makes is the user's (a signed-in page, a download of
their data, the sign-in form with its CSRF token), so none is kept by the browser's cache or a
proxy's (`Cache-Control: no-store`; `private` still lets the browser keep it on disk, readable
after sign-out), unless the view marked it `public`. Static files are served before Django's
middleware and keep their own caching.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

from chatapp.patches.inline_middleware import InlineHooks


class NoStore(InlineHooks, MiddlewareMixin):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if "public" not in response.get("Cache-Control", ""):
            response["Cache-Control"] = "no-store"
        return response


def sandboxed[R: HttpResponseBase](response: R) -> R:
    """`response`, whose bytes are the user's or a model's (a file, an export, the text as
    written), marked never to be run as a page of our origin: no type sniffing, and a CSP that
    allows nothing and sandboxes it. One place for the pair, which every such view sets."""
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response
