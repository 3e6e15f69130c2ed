"""Finding and keeping conversations: the sidebar's date groups, search, delete (from the page's
menu or a sidebar entry's), export, and the site icon.

The sidebar groups a user's conversations by the day they were last active in the server's
TIME_ZONE (Today, Yesterday, Previous 7 days, Older). Its Today list is always there, even
empty, as `#conversation-list`: a new or continued conversation is moved to its top by an
out-of-band swap, without rendering the list again.

An htmx request says which page sent it (`HX-Current-URL`); the rename and delete endpoints use
it to tell the conversation on screen (its title and tab title change, deleting it leaves the
page) from another entry of the sidebar (only the entry changes).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect

from chatapp.conversations import export, user_text
from chatapp.conversations.deleting import delete_conversation
from chatapp.conversations.models import Conversation, Folder
from chatapp.conversations.search import RESULTS
from chatapp.conversations.search import search as find
from chatapp.middleware import sandboxed

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.authenticated import AuthenticatedRequest

SIDEBAR_LENGTH = 200
GROUPS = {
    "today": "Today",
    "yesterday": "Yesterday",
    "week": "Previous 7 days",
    "older": "Older",
}


@dataclass(frozen=True, slots=True)
class Entry:
    conversation: Conversation
    current: bool  # the conversation on screen


@dataclass(frozen=True, slots=True)
class DateGroup:
    key: str  # a key of GROUPS
    label: str
    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class FolderGroup:
    folder: Folder
    entries: list[Entry]  # pinned first, then newest first


@dataclass(frozen=True, slots=True)
class Sidebar:
    pinned: list[Entry]  # pinned and in no folder, newest pin first
    folders: list[FolderGroup]  # by name
    groups: list[DateGroup]  # Today first and always; the others when they have entries
    shown_pk: int | None
    archived: int  # how many are archived (the Archived page lists them)

    @property
    def empty(self) -> bool:
        """No conversation listed anywhere (archived ones are not listed)."""
        lists = [self.pinned, *(group.entries for group in self.groups)]
        return not any(lists) and not any(group.entries for group in self.folders)


@dataclass(frozen=True, slots=True)
class DayStarts:
    """When today, yesterday and the day a week before today began in the server's time zone:
    a conversation's date group is found by comparing its time with these, not by converting
    each time to a local date (a sidebar of 200 spent a few milliseconds on that)."""

    today: datetime.datetime
    yesterday: datetime.datetime
    week: datetime.datetime

    @classmethod
    def of(cls, today: datetime.date) -> DayStarts:
        def start(days_before: int) -> datetime.datetime:
            day = today - datetime.timedelta(days=days_before)
            return timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))

        return cls(start(0), start(1), start(7))

    def group(self, updated_at: datetime.datetime) -> str:
        """The key of the group a conversation last active at `updated_at` is listed under."""
        if updated_at >= self.today:  # a clock ahead of ours is not the future
            return "today"
        if updated_at >= self.yesterday:
            return "yesterday"
        return "week" if updated_at >= self.week else "older"


def date_group(updated_at: datetime.datetime, today: datetime.date) -> str:
    """The key of the group a conversation last active at `updated_at` is listed under."""
    return DayStarts.of(today).group(updated_at)


# The conversations placed (pinned or in a folder) and the rest, up to `SIDEBAR_LENGTH` of each,
# pinned first, newest pin first, then the newest (the rest has no pin), with the count of the
# archived ones beside each row. Written out rather than built with the ORM: the query's
# compilation (a window, a subquery) cost more CPU than the statements it saves.
_SIDEBAR_SQL = f"""
SELECT id, title, updated_at, pinned_at, folder_id, imported_from, placed, archived FROM (
    SELECT c.id, c.title, c.updated_at, c.pinned_at, c.folder_id, c.imported_from,
        (c.pinned_at IS NOT NULL OR c.folder_id IS NOT NULL) AS placed,
        ROW_NUMBER() OVER (
            PARTITION BY (c.pinned_at IS NOT NULL OR c.folder_id IS NOT NULL)
            ORDER BY c.pinned_at DESC NULLS LAST, c.updated_at DESC, c.id DESC
        ) AS place,
        (SELECT COUNT(*) FROM {Conversation._meta.db_table} AS a
            WHERE a.user_id = %s AND a.archived_at IS NOT NULL) AS archived
    FROM {Conversation._meta.db_table} AS c
    WHERE c.user_id = %s AND c.archived_at IS NULL AND NOT c.temporary
) AS listed
WHERE place <= %s
ORDER BY pinned_at DESC NULLS LAST, updated_at DESC, id DESC
"""  # only the table's name is put in: the values are parameters


def sidebar(user: User, shown_pk: int | None = None) -> Sidebar:
    """The user's conversations not archived: pinned ones first, then their folders, then the
    newest of the rest by date group; `shown_pk` is the one on screen. Two statements: the
    conversations placed (pinned or filed) and the rest, up to `SIDEBAR_LENGTH` of each, with
    the count of the archived ones beside each row; and the folders."""
    day_starts = DayStarts.of(timezone.localdate())
    rows = list(Conversation.objects.raw(_SIDEBAR_SQL, [user.pk, user.pk, SIDEBAR_LENGTH]))
    pinned: list[Entry] = []
    filed: dict[int, list[Entry]] = {}
    grouped: dict[str, list[Entry]] = {key: [] for key in GROUPS}
    for conversation in rows:
        entry = Entry(conversation, conversation.pk == shown_pk)
        if not conversation.placed:  # type: ignore[attr-defined]  # the query's: 0 or False
            grouped[day_starts.group(conversation.updated_at)].append(entry)
        elif conversation.folder_id is None:
            pinned.append(entry)
        else:
            filed.setdefault(conversation.folder_id, []).append(entry)
    groups = [
        DateGroup(key, label, grouped[key])
        for key, label in GROUPS.items()
        if key == "today" or grouped[key]
    ]
    folders = [
        FolderGroup(folder, filed.get(folder.pk, [])) for folder in Folder.objects.filter(user=user)
    ]
    archived = (
        int(rows[0].archived)  # type: ignore[attr-defined]  # the query's column
        if rows
        else Conversation.objects.filter(user=user, archived_at__isnull=False).count()
    )
    return Sidebar(pinned, folders, groups, shown_pk, archived)


def shown_conversation(request: AuthenticatedRequest) -> int | None:
    """The conversation on the page that sent this htmx request, if it shows one."""
    path = request.htmx.current_url_abs_path
    if not path:
        return None
    try:
        match = resolve(urlsplit(path).path)
    except Resolver404:
        return None
    pk = match.kwargs.get("pk")
    return pk if match.view_name == "chat:conversation" and isinstance(pk, int) else None


def moved_to_top(response: HttpResponse, conversation: Conversation) -> HttpResponse:
    """`response` with the shown `conversation`'s sidebar entry moved to the top of Today (out of
    band). Renders no query: the conversation is loaded. A temporary chat is not listed."""
    if conversation.temporary:
        return response
    response.write(render_to_string("chatapp/_sidebar_moved.html", {"item": conversation}))
    return response


@login_required
@require_GET
def search(request: AuthenticatedRequest) -> HttpResponse:
    """The sidebar's search results, in place of its list."""
    query = user_text.one_line(request.GET.get("q", ""))
    hits = find(request.user, query) if query else []
    archived = Conversation.objects.filter(
        user=request.user, pk__in=[hit.pk for hit in hits], archived_at__isnull=False
    )
    context = {
        "query": query,
        "hits": hits,
        "more": len(hits) >= RESULTS,
        "archived": set(archived.values_list("pk", flat=True)) if hits else set(),
    }
    return render(request, "chatapp/_search_results.html", context)


@login_required
@require_POST
async def delete(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Delete a conversation, stopping its answers still streaming; the page then goes home."""
    user = await request.auser()
    conversation = await Conversation.objects.filter(pk=pk, user=user).afirst()
    if conversation is None:
        raise Http404("No such conversation.")
    await delete_conversation(conversation)
    url = reverse("chat:home")
    return HttpResponseClientRedirect(url) if request.htmx else HttpResponseRedirect(url)


@login_required
@require_POST
async def delete_entry(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Delete from a sidebar entry's menu: the delete view, whose page then goes home; but on the
    page of another conversation only the entry goes, and the page stays."""
    response = await delete(request, pk)
    if not request.htmx or shown_conversation(request) == pk:
        return response
    return HttpResponse(format_html('<div hx-swap-oob="delete:#conversation-item-{}"></div>', pk))


@login_required
@require_GET
def export_markdown(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    conversation = _owned(request, pk)
    text = export.as_markdown(conversation, export.messages_of(conversation))
    return _download(text, "text/markdown; charset=utf-8", export.filename(conversation, "md"))


@login_required
@require_GET
def export_json(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    conversation = _owned(request, pk)
    text = export.as_json(conversation, export.messages_of(conversation))
    return _download(text, "application/json", export.filename(conversation, "json"))


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico where a page names no icon (the admin's, a bare response)."""
    return HttpResponseRedirect(static("chatapp/icon.svg"))


def _owned(request: AuthenticatedRequest, pk: int) -> Conversation:
    return get_object_or_404(
        Conversation.objects.select_related("gateway"), pk=pk, user=request.user
    )


def _download(text: str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(text.encode(), content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return sandboxed(response)
