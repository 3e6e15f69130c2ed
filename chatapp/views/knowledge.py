"""Knowledge collections' pages (`/knowledge/`): the collections a user may use, making one,
and one collection's files: adding them, each file's state with its progress, removing one and
indexing one again. The files' list polls itself every second while any file is busy (htmx), and
stops once none is.

A user sees their own collections and those shared with them; any other is a 404, as if it did
not exist. A collection's files are changed by its owner, and a shared one's (made in the admin,
with no owner) by staff; the indexing itself runs in the task worker (`knowledge/tasks.py`), so
no page waits for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q, QuerySet
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chatapp.access.shared_or_own import visible_to
from chatapp.knowledge import files
from chatapp.knowledge.limits import LIMITS_IN_WORDS, MAX_FILE_BYTES
from chatapp.knowledge.models import Collection, KnowledgeFile

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.authenticated import AuthenticatedRequest

ACCEPT = ",".join(
    [".pdf", ".md", ".markdown", ".txt", ".html", ".htm", ".docx", "text/plain", "text/markdown"]
)


class CollectionForm(forms.Form):
    name = forms.CharField(
        label="Name", max_length=100, error_messages={"required": "Give the collection a name."}
    )
    description = forms.CharField(
        label="What it holds",
        required=False,
        max_length=300,
        help_text="Optional; shown when it is chosen in a chat.",
    )


def visible(user: User) -> QuerySet[Collection]:
    # Through the pks: a user in two of a collection's groups would otherwise get it twice.
    pks = Collection.objects.filter(visible_to(user)).values("pk")
    return Collection.objects.filter(pk__in=pks)


def changeable(user: User) -> QuerySet[Collection]:
    """The collections whose files `user` may change: their own; the shared ones, for staff."""
    mine = Q(owner=user) | (Q(owner__isnull=True) if user.is_staff else Q(pk__in=[]))
    return visible(user).filter(mine)


@login_required
@require_GET
def collections(request: AuthenticatedRequest) -> HttpResponse:
    rows = list(
        visible(request.user).annotate(file_count=Count("files")).order_by("name", "owner", "pk")
    )
    context = {
        "own": [row for row in rows if row.owner_id],
        "shared": [row for row in rows if not row.owner_id],
    }
    return render(request, "chatapp/knowledge.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def new_collection(request: AuthenticatedRequest) -> HttpResponse:
    form = CollectionForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        row = Collection.objects.create(
            owner=request.user,
            name=form.cleaned_data["name"].strip(),
            description=form.cleaned_data["description"].strip(),
        )
        return HttpResponseRedirect(reverse("chat:collection", args=[row.pk]))
    return render(request, "chatapp/knowledge_form.html", {"form": form})


def _files_context(request: AuthenticatedRequest, row: Collection) -> dict[str, object]:
    rows = list(row.files.defer("data").order_by("name", "pk"))
    return {
        "collection": row,
        "files": rows,
        "busy": any(file.busy for file in rows),
        "may_change": changeable(request.user).filter(pk=row.pk).exists(),
    }


@login_required
@require_GET
def collection(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(visible(request.user), pk=pk)
    context = _files_context(request, row) | {
        "limits": LIMITS_IN_WORDS,
        "accept": ACCEPT,
        "max_bytes": MAX_FILE_BYTES,  # refused as chosen (`knowledge_upload.js`), as here
        "max_words": f"{MAX_FILE_BYTES // 2**20} MB",
    }
    return render(request, "chatapp/knowledge_collection.html", context)


def _files(request: AuthenticatedRequest, row: Collection, status: int = 200) -> HttpResponse:
    if request.htmx:
        context = _files_context(request, row)
        return render(request, "chatapp/_knowledge_files.html", context, status=status)
    return HttpResponseRedirect(reverse("chat:collection", args=[row.pk]))


@login_required
@require_http_methods(["GET", "POST"])
def collection_files(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """GET: the files' list (what the page polls). POST: add the files chosen."""
    if request.method == "GET":
        return _files(request, get_object_or_404(visible(request.user), pk=pk))
    row = get_object_or_404(changeable(request.user), pk=pk)
    chosen = request.FILES.getlist("files")
    if not chosen:
        messages.error(request, "Choose a file to add.")
        return _files(request, row, status=400)
    # One file too large is named by `add_file` ("Big.pdf is larger than 20 MB."), not as many.
    if len(chosen) > 1 and sum(upload.size or 0 for upload in chosen) > MAX_FILE_BYTES:
        messages.error(
            request,
            f"Together these files are over {MAX_FILE_BYTES // 2**20} MB: "
            "add them a few at a time.",
        )
        return _files(request, row, status=413)
    refused = 0
    for upload in chosen:
        try:
            files.add_file(row, upload.name or "", upload.read(), request.user.pk)
        except files.FileRefused as exc:
            messages.error(request, str(exc))
            refused += 1
    return _files(request, row, status=400 if refused == len(chosen) else 200)


def _changeable_file(request: AuthenticatedRequest, pk: int, file_pk: int) -> KnowledgeFile:
    row = get_object_or_404(changeable(request.user), pk=pk)
    return get_object_or_404(row.files.defer("data"), pk=file_pk)


@login_required
@require_POST
def remove_file(request: AuthenticatedRequest, pk: int, file_pk: int) -> HttpResponse:
    file = _changeable_file(request, pk, file_pk)
    files.remove_file(file)
    messages.success(request, f"Removed {file.name}.")
    return _files(request, file.collection)


@login_required
@require_POST
def reindex_file(request: AuthenticatedRequest, pk: int, file_pk: int) -> HttpResponse:
    file = _changeable_file(request, pk, file_pk)
    if not files.reindex(file):
        messages.error(request, f"{file.name} is being indexed already.")
    return _files(request, file.collection)


@login_required
@require_POST
def delete_collection(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(visible(request.user).filter(owner=request.user), pk=pk)
    files.delete_collection(row)
    messages.success(request, f"Deleted the collection {row.name}.")
    return HttpResponseRedirect(reverse("chat:knowledge"))
