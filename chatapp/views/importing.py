"""The Import page: a file exported by ChatGPT or Open WebUI, read into the user's conversations
(`conversations/importing.py`).

The upload is bounded by its declared length before its body is parsed, and the multipart body
and the JSON are parsed on a thread of their own (`thread_sensitive=False`): a 50 MB file holds
neither the event loop nor the one thread the app's other sync views share. A user imports one
file at a time: a second import while one runs is refused in words, by a key in the shared cache
(Redis across processes), so no user holds more than one thread and one file's memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from chatapp.access.body_limits import MAX_IMPORT_BYTES
from chatapp.conversations import importing
from chatapp.conversations.import_formats import Imported
from chatapp.views import sidebar_push

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.authenticated import AuthenticatedRequest

_FORM_OVERHEAD = 64 * 1024  # multipart boundaries, headers and the CSRF field
# How long a user's running import is remembered if its process dies before it lets go: past any
# import's reading deadline and writing time.
_RUNNING_TTL = 10 * 60


@login_required
@require_http_methods(["GET", "POST"])
async def import_page(request: AuthenticatedRequest) -> HttpResponse:
    if request.method == "GET":
        return await sync_to_async(_page)(request, {})
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if not declared.isdigit() or int(declared) > MAX_IMPORT_BYTES + _FORM_OVERHEAD:
        return await _refused(request, _too_big())
    user = await request.auser()
    running = f"import-running:{user.pk}"
    if not await cache.aadd(running, True, _RUNNING_TTL):
        return await _refused(
            request,
            "Another import of yours is still running: wait until it has finished, then import "
            "this file.",
            status=409,
        )
    try:
        return await _import(request, user)
    finally:
        await cache.adelete(running)


async def _import(request: AuthenticatedRequest, user: User) -> HttpResponse:
    upload = await sync_to_async(_uploaded, thread_sensitive=False)(request)
    if upload is None:
        return await _refused(request, "Choose a file to import.")
    if upload.size is None or upload.size > MAX_IMPORT_BYTES:
        return await _refused(request, _too_big())
    try:
        conversations = await sync_to_async(_parse, thread_sensitive=False)(upload)
    except importing.ImportRefused as exc:
        return await _refused(request, str(exc))
    result = await sync_to_async(importing.save)(user, conversations)
    await sidebar_push.atell(user.pk)
    words = {
        "conversations": f"{result.conversations:,}",
        "messages": f"{result.messages:,}",
    }
    return await sync_to_async(_page)(request, {"result": result, "result_words": words})


def _uploaded(request: AuthenticatedRequest) -> UploadedFile[bytes] | None:
    return request.FILES.get("file")


def _parse(upload: UploadedFile[bytes]) -> list[Imported]:
    with upload.open("rb") as file:
        return importing.parse(file.read(MAX_IMPORT_BYTES + 1))


def _too_big() -> str:
    return f"The file is over {MAX_IMPORT_BYTES // (1024 * 1024)} MB, the most one import takes."


async def _refused(request: AuthenticatedRequest, error: str, status: int = 400) -> HttpResponse:
    response = await sync_to_async(_page)(request, {"error": error})
    response.status_code = status
    return response


def _page(request: AuthenticatedRequest, context: dict[str, object]) -> HttpResponse:
    limits = {
        "max_mb": f"{MAX_IMPORT_BYTES // (1024 * 1024):,}",
        "max_conversations": f"{importing.MAX_CONVERSATIONS:,}",
        "max_messages": f"{importing.MAX_MESSAGES:,}",
    }
    return render(request, "chatapp/import.html", {**limits, **context})
