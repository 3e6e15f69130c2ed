"""What people said of answers (`Feedback`), in the admin: read-only, newest first, each row
linked to the generation it rates (whose cost is on record). The cost of the answers rated one
way or the other is the generation list's and the summary's (`generations.FeedbackGiven`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from chatapp.costs.models import Feedback

if TYPE_CHECKING:
    _FeedbackAdmin = admin.ModelAdmin[Feedback]
else:
    _FeedbackAdmin = admin.ModelAdmin

COMMENT_SHOWN = 120  # characters of a comment in the list


@admin.register(Feedback)
class FeedbackAdmin(_FeedbackAdmin):
    list_display = (
        "updated_at",
        "rating",
        "comment_shown",
        "user",
        "answer_model",
        "generation_link",
    )
    list_filter = ("rating", "generation__model")
    search_fields = ("comment", "user__username")
    list_select_related = ("user", "generation")
    ordering = ("-updated_at", "-id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Feedback | None = None) -> bool:
        return False  # what a user said is theirs to change, in the chat

    @admin.display(description="comment")
    def comment_shown(self, obj: Feedback) -> str:
        text = obj.comment
        return text if len(text) <= COMMENT_SHOWN else text[: COMMENT_SHOWN - 1] + "…"

    @admin.display(description="model", ordering="generation__model")
    def answer_model(self, obj: Feedback) -> str:
        return obj.generation.model

    @admin.display(description="generation")
    def generation_link(self, obj: Feedback) -> str:
        url = reverse("admin:chatapp_generation_change", args=[obj.generation_id])
        return format_html('<a href="{}">#{}</a>', url, obj.generation_id)
