"""Read aloud: an answer's audio streamed to the page's `<audio>` as it arrives, and what became
of the newest read aloud (for the words the page shows when it ends).

A GET, so that the audio element itself requests it and plays as bytes arrive (a POST would
need the whole body in script before playing, and media source extensions take no WAV). A GET
that spends money is a CSRF risk, so it is only served to a fetch the browser marks
`Sec-Fetch-Site: same-origin`: browsers set that header themselves and no page can forge it, so a
cross-site `<audio src>`, link or form is refused, as is a client that sends none (the session
cookie is `SameSite=Lax` too, which keeps it off cross-site subresource requests). A completed
earlier read aloud is served from storage and costs nothing, in the byte ranges the player asks
for (`byte_ranges`: without them Chromium cannot seek in it); a streamed one has none.

One read aloud per answer at a time: requests of this process join the running one and play the same
audio from its start (`stream.start_or_join`); one in another process answers 409, in
words (`records`, whose row lock keeps two processes from both starting one). A stopped
read aloud is not started again for a few seconds, and read alouds count with the answers a user
starts per minute (`rate_limits`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.views.decorators.http import require_GET

from chatapp.access.rate_limits import RateLimited
from chatapp.errors import ChatAppError
from chatapp.middleware import sandboxed
from chatapp.read_aloud import records, stream
from chatapp.read_aloud.byte_ranges import Unsatisfiable, requested_range
from chatapp.read_aloud.records import NoSuchAnswer, ReadAloudRefused
from chatapp.records_thread import on_record_thread_from_view
from gateway_client.errors import GatewayError

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, Iterable

    from chatapp.authenticated import AuthenticatedRequest

__all__ = ["read_aloud", "read_aloud_state"]

CROSS_SITE = "Read aloud plays only on this site's own pages."


def _audio(
    content: bytes | Iterable[bytes] | AsyncIterable[bytes], media_type: str
) -> HttpResponseBase:
    response: HttpResponseBase
    if isinstance(content, bytes):
        response = HttpResponse(content, content_type=media_type)
    else:
        response = StreamingHttpResponse(content, content_type=media_type)
    return sandboxed(response)


def _stored(data: bytes, media_type: str, range_header: str | None) -> HttpResponseBase:
    """The stored audio whole, or the one byte range asked for (206; 416 past its end)."""
    response: HttpResponseBase
    try:
        asked = requested_range(range_header, len(data))
    except Unsatisfiable:
        response = _refused("That range is past the end of the audio.", 416)
        response["Content-Range"] = f"bytes */{len(data)}"
        return response
    if asked is None:
        response = _audio(data, media_type)
    else:
        first, last = asked
        response = _audio(data[first : last + 1], media_type)
        response.status_code = 206
        response["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
    response["Accept-Ranges"] = "bytes"
    return response


def _refused(text: str, status: int) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


@login_required
@require_GET
async def read_aloud(request: AuthenticatedRequest, pk: int) -> HttpResponseBase:
    """The answer `pk` read aloud: from storage when a completed read aloud exists, else streamed
    from the gateway as a new read aloud (a `Generation` of kind `speech`)."""
    if request.headers.get("Sec-Fetch-Site") != "same-origin":
        return _refused(CROSS_SITE, 403)
    user = await request.auser()
    stored = await on_record_thread_from_view(records.stored_audio, user, pk)
    if stored is not None:
        return _stored(bytes(stored.data), stored.media_type, request.headers.get("Range"))
    try:
        running, seat = await stream.start_or_join(user, pk)
    except NoSuchAnswer as exc:
        raise Http404(str(exc)) from exc
    except ReadAloudRefused as exc:
        return _refused(str(exc), 409)
    except RateLimited as exc:
        response = _refused(str(exc), 429)
        response["Retry-After"] = str(math.ceil(exc.retry_after))
        return response
    try:
        media_type = await running.opened()
    except BaseException as exc:
        seat.leave()  # the browser left while the gateway prepared the audio, or it refused
        if isinstance(exc, GatewayError):
            return _refused(f"The gateway refused to read it aloud: {exc.info.message}", 502)
        if isinstance(exc, ChatAppError):
            return _refused(str(exc), 502)
        raise
    return _audio(running.relay(seat), media_type)


@login_required
@require_GET
async def read_aloud_state(request: AuthenticatedRequest, pk: int) -> JsonResponse:
    """The newest read aloud of the answer `pk`: its status, what went wrong in words, and why a
    new read aloud would be refused now ("": it would not)."""
    user = await request.auser()
    generation = await on_record_thread_from_view(records.newest_read_aloud, user, pk)
    if generation is None:
        raise Http404("This answer has not been read aloud.")
    refused = await on_record_thread_from_view(records.refusal, user, pk)
    response = JsonResponse(
        {"status": generation.status, "error": generation.error_message, "refused": refused}
    )
    return response
