"""The admin's assistants and prompts: those it shares (no owner) with everyone or with groups,
and, to look after them, users' own. Registered from `chatapp/admin.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin

from chatapp import tools
from chatapp.assistants.models import Assistant, Prompt
from chatapp.assistants.prompt_text import variables

if TYPE_CHECKING:
    _AssistantAdmin = admin.ModelAdmin[Assistant]
    _PromptAdmin = admin.ModelAdmin[Prompt]
    _AssistantForm = forms.ModelForm[Assistant]
else:
    _AssistantAdmin = _PromptAdmin = admin.ModelAdmin
    _AssistantForm = forms.ModelForm


class AssistantAdminForm(_AssistantForm):
    """Tools as checkboxes of the registry's, not the JSON list the row keeps."""

    tools = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The model may call these while it answers (those switched off are not offered).",
    )

    class Meta:
        model = Assistant
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["tools"]
        assert isinstance(field, forms.MultipleChoiceField)
        # Every tool an admin may give: the built-ins and every MCP server's (a member of a group
        # the server is not open to is not offered it when the chat starts: `tools.offered`).
        field.choices = [(tool.name, tool.title) for tool in tools.choosable(None)]


def _sharing(obj: Assistant | Prompt) -> str:
    if obj.owner_id is not None:
        return f"own ({obj.owner})"
    names = [group.name for group in obj.groups.all()]
    return "groups: " + ", ".join(names) if names else "everyone"


@admin.register(Assistant)
class AssistantAdmin(_AssistantAdmin):
    """Leave Owner empty to share one: with the groups chosen, or with everyone."""

    form = AssistantAdminForm
    list_display = ("name", "model", "shared_with", "updated_at")
    list_filter = (("owner", admin.EmptyFieldListFilter), "groups")
    search_fields = ("name", "description", "owner__username")
    raw_id_fields = ("owner",)
    filter_horizontal = ("groups", "collections")
    fieldsets = (
        (None, {"fields": ("name", "description", "owner", "groups")}),
        ("Model", {"fields": ("gateway", "model", "collections")}),
        (
            "Answer settings",
            {"fields": ("system_prompt", "temperature", "max_tokens", "reasoning_effort", "tools")},
        ),
    )

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).select_related("owner").prefetch_related("groups")

    @admin.display(description="shared with")
    def shared_with(self, obj: Assistant) -> str:
        return _sharing(obj)


@admin.register(Prompt)
class PromptAdmin(_PromptAdmin):
    """Leave Owner empty to share one: with the groups chosen, or with everyone."""

    list_display = ("name", "asks_for", "shared_with", "updated_at")
    list_filter = (("owner", admin.EmptyFieldListFilter), "groups")
    search_fields = ("name", "text", "owner__username")
    raw_id_fields = ("owner",)
    filter_horizontal = ("groups",)
    fields = ("name", "text", "owner", "groups")

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).select_related("owner").prefetch_related("groups")

    @admin.display(description="shared with")
    def shared_with(self, obj: Prompt) -> str:
        return _sharing(obj)

    @admin.display(description="asks for")
    def asks_for(self, obj: Prompt) -> str:
        return ", ".join(variables(obj.text))
