"""The admin's knowledge collections: those it shares (no owner) with everyone or with groups,
as assistants are, and users' own to look after. Files are added on the collection's page
(`/knowledge/<pk>/`, where staff change a shared collection's files); here they are listed with
their states. Registered from `chatapp/admin.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html

from chatapp.knowledge.models import Collection, KnowledgeFile

if TYPE_CHECKING:
    _CollectionAdmin = admin.ModelAdmin[Collection]
    _FileInline = admin.TabularInline[KnowledgeFile, Collection]
else:
    _CollectionAdmin = admin.ModelAdmin
    _FileInline = admin.TabularInline


class FileInline(_FileInline):
    model = KnowledgeFile
    fields = ("name", "size", "state", "done", "total", "error", "embedding_model", "updated_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).defer("data")


@admin.register(Collection)
class CollectionAdmin(_CollectionAdmin):
    """Leave Owner empty to share one: with the groups chosen, or with everyone. Add its files
    on its page (the link above the files)."""

    list_display = ("name", "shared_with", "file_count", "updated_at")
    list_filter = (("owner", admin.EmptyFieldListFilter), "groups")
    search_fields = ("name", "description", "owner__username")
    raw_id_fields = ("owner",)
    filter_horizontal = ("groups",)
    fields = ("name", "description", "owner", "groups", "files_page")
    readonly_fields = ("files_page",)
    inlines = (FileInline,)

    def get_queryset(self, request: Any) -> Any:
        queryset = super().get_queryset(request).select_related("owner")
        return queryset.prefetch_related("groups").annotate(files_in=Count("files"))

    @admin.display(description="shared with")
    def shared_with(self, obj: Collection) -> str:
        if obj.owner_id is not None:
            return f"own ({obj.owner})"
        names = [group.name for group in obj.groups.all()]
        return "groups: " + ", ".join(names) if names else "everyone"

    @admin.display(description="files")
    def file_count(self, obj: Collection) -> int:
        return int(getattr(obj, "files_in", 0))

    @admin.display(description="files page")
    def files_page(self, obj: Collection) -> str:
        if obj.pk is None:
            return "Save the collection first, then add its files on its page."
        url = reverse("chat:collection", args=[obj.pk])
        return format_html('<a href="{}">Add and remove its files</a>', url)
