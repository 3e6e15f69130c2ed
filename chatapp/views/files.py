"""The files a conversation holds, served from our origin to their owner only (another user's
is a 404): what the gateway sent with an answer (`attachment`) and what the user attached to a
message (`upload`).

Neither is ever rendered as a page here: each goes out in the type its bytes say or as bytes to
download, with nosniff and a sandboxing CSP. Caching is the `NoStore` middleware's alone: these
are the user's files, which no cache, the browser's disk included, keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET

from chatapp.conversations.models import Message, Upload
from chatapp.middleware import sandboxed
from chatapp.rendering import attachments
from chatapp.rendering.image_checks import sniffed_type

if TYPE_CHECKING:
    from chatapp.authenticated import AuthenticatedRequest


@login_required
@require_GET
def attachment(request: AuthenticatedRequest, pk: int, index: int) -> HttpResponse:
    """A file, audio clip or generated image the gateway sent, from our origin and never rendered
    as a page here: an image in the raster type its bytes say, audio in a playable type for the
    page's player, anything else as bytes to download; always with nosniff and a sandboxing CSP
    in case a browser is talked into showing it as something else."""
    message = get_object_or_404(Message, pk=pk, conversation__user=request.user)
    items = message.attachments if isinstance(message.attachments, list) else []
    item = items[index] if index < len(items) and isinstance(items[index], dict) else {}
    data = attachments.decoded(item)
    if data is None:
        raise Http404("No such attachment.")
    image_type = attachments.served_image_type(item, data)
    media_type = image_type or attachments.playable_type(item) or "application/octet-stream"
    filename = attachments.safe_filename(item.get("filename"), f"attachment-{index}")
    response = HttpResponse(data, content_type=media_type)
    # A checked raster image opens in a tab when clicked through; everything else downloads.
    disposition = content_disposition_header(image_type is None, filename)
    if disposition is not None:
        response["Content-Disposition"] = disposition
    return sandboxed(response)


@login_required
@require_GET
def upload(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A file the user attached to a message, to its owner only (another user's is a 404): an
    image inline in the raster type its bytes say, a document as a download; never rendered as
    a page here (nosniff and a sandboxing CSP)."""
    found = get_object_or_404(Upload, pk=pk, message__conversation__user=request.user)
    data = bytes(found.data)
    image_type = sniffed_type(data) if found.kind == Upload.Kind.IMAGE else None
    if image_type is not None:
        response = HttpResponse(data, content_type=image_type)
    elif found.media_type == "application/pdf":
        response = HttpResponse(data, content_type="application/pdf")
    else:
        response = HttpResponse(data, content_type="text/plain; charset=utf-8")
    disposition = content_disposition_header(image_type is None, found.filename)
    if disposition is not None:
        response["Content-Disposition"] = disposition
    return sandboxed(response)
