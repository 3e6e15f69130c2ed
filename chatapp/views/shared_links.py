"""Shared links: the owner makes one from a conversation's header (More), lists and revokes
them; anyone with one reads that branch, signed in or not.

The shared page is the conversation as the app renders it (each answer's stored final render,
its reasoning and tool calls read-only) with nothing of the owner's beyond it: no costs or
token counts, no error details from the gateway, no controls, no composer, no socket, and not
what a search of the owner's other conversations found, nor an answer that could quote it.
It reads no session and sets no cookie, is `noindex` and `no-store`, and sends no referrer.
Images are shown when they are safe to serve to anyone: an image stream's, whose bytes are a
raster type read from them (served under the link, like the page), and raster `data:` images;
an https image stays a link, as in the app. What of the branch is kept back (the results of a
private tool and the answers after one; audio and files, which would be downloads of whatever the
gateway sent, served from this site to anyone; an answer still being written, as the page has no
socket to stream it) is `conversations.shared_links.shown`'s rule, and the page says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST, require_safe

from chatapp.conversations import shared_links
from chatapp.conversations.models import SharedLink
from chatapp.middleware import sandboxed
from chatapp.rendering import attachments

if TYPE_CHECKING:
    from chatapp.authenticated import AuthenticatedRequest


@dataclass(frozen=True, slots=True)
class CreatedLink:
    """A link just made, as its owner is shown it this once."""

    url: str
    link: SharedLink
    messages: int  # in the branch it shares


def _public[R: HttpResponseBase](response: R) -> R:
    """A shared page's headers (the middleware adds `no-store` and the CSP)."""
    response["X-Robots-Tag"] = "noindex"
    response["Referrer-Policy"] = "no-referrer"
    return response


def _missing(request: HttpRequest) -> HttpResponse:
    """The same page for a link revoked, unknown or whose conversation is gone."""
    return _public(render(request, "chatapp/shared/missing.html", status=404))


@require_safe
def shared_page(request: HttpRequest, token: str) -> HttpResponse:
    link = shared_links.live(token)
    if link is None:
        return _missing(request)
    context = {"link": link, "token": token, "shared": shared_links.shown(link)}
    return _public(render(request, "chatapp/shared/page.html", context))


@require_safe
def shared_image(request: HttpRequest, token: str, position: int, index: int) -> HttpResponse:
    """An image stream's image in a shared answer, in the raster type its bytes say; a bare 404
    for anything else, with no page (and no cookie) of the app's."""
    link = shared_links.live(token)
    shown = shared_links.shown_at(link, position) if link is not None else None
    message = shown.message if shown is not None and not shown.withheld else None
    generation = getattr(message, "generation", None)
    items = message.attachments if message and isinstance(message.attachments, list) else []
    item = items[index] if index < len(items) and isinstance(items[index], dict) else {}
    data = attachments.decoded(item)
    image_type = attachments.served_image_type(item, data) if data is not None else None
    if generation is None or generation.is_running or data is None or image_type is None:
        not_found = HttpResponse("No such image.", status=404, content_type="text/plain")
        return _public(not_found)
    response = HttpResponse(data, content_type=image_type)
    return sandboxed(_public(response))


@login_required
@require_POST
def share(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A new link to the conversation `pk`, for the branch the page shows (`after`: its last
    message), shown once: under the header's More, or on the list without htmx."""
    after = request.POST.get("after", "")
    try:
        new = shared_links.create(request.user, pk, int(after) if after.isdigit() else None)
    except shared_links.NotShareable as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    created = CreatedLink(
        request.build_absolute_uri(reverse("chat:shared_page", args=[new.token])),
        new.link,
        len(shared_links.branch_keys(new.link)),
    )
    if request.htmx:
        return render(request, "chatapp/shared/_created.html", {"created": created})
    return _list(request, created)


@login_required
@require_GET
def links(request: AuthenticatedRequest) -> HttpResponse:
    return _list(request, None)


def _list(request: AuthenticatedRequest, created: CreatedLink | None) -> HttpResponse:
    context = {"links": shared_links.links_of(request.user), "created": created}
    return render(request, "chatapp/shared/links.html", context)


@login_required
@require_POST
def revoke(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    link = shared_links.revoke(request.user, pk)
    if not request.htmx:
        return HttpResponseRedirect(reverse("chat:shared_links"))
    item = shared_links.OwnedLink(link, len(shared_links.branch_keys(link)))
    return render(request, "chatapp/shared/_link.html", {"item": item})
