"""Admin registrations with the columns an operator scans first: who, which model, state, cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin

from .models import Conversation, Generation, Message

if TYPE_CHECKING:  # generic in django-stubs only: Django's admin classes are not subscriptable
    _MessageInline = admin.TabularInline[Message, Conversation]
    _ConversationAdmin = admin.ModelAdmin[Conversation]
    _MessageAdmin = admin.ModelAdmin[Message]
    _GenerationAdmin = admin.ModelAdmin[Generation]
else:
    _MessageInline = admin.TabularInline
    _ConversationAdmin = _MessageAdmin = _GenerationAdmin = admin.ModelAdmin


class MessageInline(_MessageInline):
    model = Message
    fields = ("role", "content", "created_at")
    readonly_fields = ("created_at",)
    extra = 0
    show_change_link = True


@admin.register(Conversation)
class ConversationAdmin(_ConversationAdmin):
    list_display = ("__str__", "user", "model", "created_at", "updated_at")
    list_filter = ("model",)
    search_fields = ("title", "user__username")
    raw_id_fields = ("user",)
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(_MessageAdmin):
    list_display = ("id", "conversation", "role", "short_content", "created_at")
    list_filter = ("role",)
    search_fields = ("content",)
    raw_id_fields = ("conversation",)

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]


@admin.register(Generation)
class GenerationAdmin(_GenerationAdmin):
    list_display = (
        "id",
        "user",
        "model",
        "status",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "cost_unit",
        "cost_source",
        "ttft_ms",
        "started_at",
        "upstream_id",
    )
    list_filter = ("status", "cost_source", "model", "started_at")
    search_fields = ("upstream_id", "request_id", "conversation__user__username")
    raw_id_fields = ("message", "conversation")
    date_hierarchy = "started_at"
    list_select_related = ("conversation__user",)

    @admin.display(ordering="conversation__user__username")
    def user(self, obj: Generation) -> str:
        return obj.conversation.user.get_username()
