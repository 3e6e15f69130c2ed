"""The composer's `#` menu (`static/chatapp/knowledge_menu.js`): the collections a user may use
and their files that are ready, as JSON. Asked for when a `#` is first typed, not with every page,
so a page that never uses it costs nothing more."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from chatapp.access.shared_or_own import visible_to
from chatapp.knowledge.models import Collection, KnowledgeFile

if TYPE_CHECKING:
    from chatapp.authenticated import AuthenticatedRequest

MENU_FILES = 500
"""Files listed at most (the newest past it are left out; their collection still offers them)."""


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@login_required
@require_GET
def menu(request: AuthenticatedRequest) -> JsonResponse:
    visible = Collection.objects.filter(visible_to(request.user)).values("pk")
    ready = Q(files__state=KnowledgeFile.State.READY)
    collections = (
        Collection.objects.filter(pk__in=visible)
        .annotate(ready=Count("files", filter=ready))
        .order_by("name", "pk")
    )
    files = (
        KnowledgeFile.objects.filter(collection__in=visible, state=KnowledgeFile.State.READY)
        .select_related("collection")
        .only("pk", "name", "collection__name")
        .order_by("name", "pk")[:MENU_FILES]
    )
    entries = [
        {
            "kind": "collection",
            "id": row.pk,
            "name": row.name,
            "detail": f"collection, {_count(row.ready, 'file')} ready",
        }
        for row in collections
    ] + [
        {"kind": "file", "id": row.pk, "name": row.name, "detail": f"in {row.collection.name}"}
        for row in files
    ]
    return JsonResponse({"entries": entries})
