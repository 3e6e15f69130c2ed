"""The sidebar's organising endpoints: pin, archive and restore, folders, several at once, and the
Archived page (`conversations/organising.py` does the changes).

Each htmx request is answered with the whole sidebar, out of band (`_sidebar.html`): a pin moves an
entry to the top, a folder gains or loses entries, and rendering it again is one place that knows
where everything goes, rather than a swap per case. The user's other tabs hear the change as a
`sidebar` push and fetch their own (`sidebar_push`). Archiving or deleting the conversation on
screen leaves its page for the first screen, as deleting it always has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from chatapp.conversations import organising
from chatapp.conversations.deleting import delete_conversation
from chatapp.conversations.models import Conversation, Folder
from chatapp.views import library, sidebar_push

if TYPE_CHECKING:
    from chatapp.authenticated import AuthenticatedRequest

ARCHIVED_LENGTH = 500


def sidebar_response(
    request: AuthenticatedRequest, *, folder_error: str = "", leaves: set[int] | None = None
) -> HttpResponse:
    """The sidebar again, out of band (or, without htmx, the page it was sent from); the first
    screen instead when the conversation on screen is among `leaves` (archived or deleted)."""
    shown_pk = library.shown_conversation(request)
    if not folder_error:
        sidebar_push.tell(request.user.pk)
    if not request.htmx:
        return HttpResponseRedirect(reverse("chat:home"))
    if shown_pk is not None and leaves and shown_pk in leaves:
        return HttpResponseClientRedirect(reverse("chat:home"))
    context = {
        "sidebar": library.sidebar(request.user, shown_pk),
        "oob": True,
        "folder_error": folder_error,
    }
    return render(request, "chatapp/_sidebar.html", context)


@login_required
@require_GET
def sidebar(request: AuthenticatedRequest) -> HttpResponse:
    """The sidebar's conversations, for a tab told that another changed them."""
    context = {"sidebar": library.sidebar(request.user, library.shown_conversation(request))}
    return render(request, "chatapp/_sidebar.html", context)


@login_required
@require_POST
def pin(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    if not organising.set_pinned(request.user, pk, request.POST.get("pinned") != "0"):
        raise Http404("No such conversation.")
    return sidebar_response(request)


@login_required
@require_POST
def archive(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    get_object_or_404(Conversation, pk=pk, user=request.user)
    organising.set_archived(request.user, [pk], archived=True)
    return sidebar_response(request, leaves={pk})


@login_required
@require_POST
def restore(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Back in the sidebar, where it was. From the Archived page its row goes; from the
    conversation's own page (its "Archived" note), the page shows it restored."""
    get_object_or_404(Conversation, pk=pk, user=request.user)
    organising.set_archived(request.user, [pk], archived=False)
    sidebar_push.tell(request.user.pk)
    if not request.htmx:
        return HttpResponseRedirect(reverse("chat:archived"))
    if library.shown_conversation(request) == pk:
        return HttpResponseClientRedirect(reverse("chat:conversation", args=[pk]))
    return HttpResponse("")


@login_required
@require_http_methods(["GET", "POST"])
def move(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """GET: the entry menu's "Move to" form; POST `folder` (a key, or empty for none): move."""
    conversation = get_object_or_404(
        Conversation.objects.only("pk", "folder_id"), pk=pk, user=request.user
    )
    if request.method == "GET":
        context = {
            "conversation": conversation,
            "folders": Folder.objects.filter(user=request.user),
        }
        return render(request, "chatapp/_move_form.html", context)
    value = request.POST.get("folder", "")
    folder_pk = int(value) if value.isdigit() and len(value) < 19 else None
    if (value and folder_pk is None) or not organising.move(request.user, pk, folder_pk):
        raise Http404("No such folder.")
    return sidebar_response(request)


@login_required
@require_POST
def create_folder(request: AuthenticatedRequest) -> HttpResponse:
    try:
        organising.create_folder(request.user, request.POST.get("name", ""))
    except organising.FolderRefused as exc:
        return sidebar_response(request, folder_error=str(exc))
    return sidebar_response(request)


@login_required
@require_POST
def rename_folder(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    get_object_or_404(Folder, pk=pk, user=request.user)
    try:
        organising.rename_folder(request.user, pk, request.POST.get("name", ""))
    except organising.FolderRefused as exc:
        return sidebar_response(request, folder_error=str(exc))
    return sidebar_response(request)


@login_required
@require_POST
def delete_folder(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    if not organising.delete_folder(request.user, pk):
        raise Http404("No such folder.")
    return sidebar_response(request)


@login_required
@require_POST
def collapse_folder(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Remember a folder folded or open (`collapsed` 1 or 0); the page already shows it so."""
    collapsed = request.POST.get("collapsed") == "1"
    if not organising.set_collapsed(request.user, pk, collapsed):
        raise Http404("No such folder.")
    return HttpResponse(status=204)


@login_required
@require_POST
async def bulk(request: AuthenticatedRequest) -> HttpResponse:
    """Archive or delete the checked conversations (`pk`, repeated; `action`). Deleting is the
    delete view's, one by one: answers still streaming stop, and the ledger keeps their costs."""
    user = await request.auser()
    keys = organising.selected_keys(request.POST.getlist("pk"))
    action = request.POST.get("action")
    if action == "archive":
        await sync_to_async(organising.set_archived)(user, keys, True)
    elif action == "delete":
        async for conversation in organising.owned(user, keys):
            await delete_conversation(conversation)
    else:
        return HttpResponse("Unknown action.", status=400, content_type="text/plain")
    return await sync_to_async(sidebar_response)(request, leaves=set(keys))


@login_required
@require_GET
def archived(request: AuthenticatedRequest) -> HttpResponse:
    """The archived conversations, newest first, each to open, restore or delete."""
    rows = Conversation.objects.filter(user=request.user, archived_at__isnull=False)
    conversations = list(rows.order_by("-archived_at")[:ARCHIVED_LENGTH])
    return render(request, "chatapp/archived.html", {"conversations": conversations})
