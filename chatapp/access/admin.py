"""The admin's groups: Django's own Group page, with the group's policy (`GroupPolicy`: the
models and tools its members may use) and its spending limits edited on it, so a group made here
and one a sign-in provider maps are set up in one place. Registered from `admin`."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin as DjangoGroupAdmin
from django.contrib.auth.models import Group

from chatapp import tools
from chatapp.access.group_policies import patterns
from chatapp.access.models import GroupPolicy
from chatapp.costs.admin.limits import SpendingLimitForm
from chatapp.costs.models import SpendingLimit
from chatapp.tools.mcp import catalog as mcp_catalog

if TYPE_CHECKING:
    _PolicyInline = admin.StackedInline[GroupPolicy, Group]
    _LimitInline = admin.TabularInline[SpendingLimit, Group]
    _PolicyForm = forms.ModelForm[GroupPolicy]
else:
    _PolicyInline = admin.StackedInline
    _LimitInline = admin.TabularInline
    _PolicyForm = forms.ModelForm


def _tool_names() -> list[str]:
    return [*tools.registry(), *(tool.name for tool in mcp_catalog.all_tools())]


class GroupPolicyForm(_PolicyForm):
    """Tool patterns are checked against the built-in tools and the MCP servers' listed ones: a
    line that names none is a typo. A line naming an MCP tool (`prefix__tool`) passes unlisted:
    its server may be away, or not listed yet."""

    class Meta:
        model = GroupPolicy
        fields = ("model_patterns", "tool_patterns")
        widgets = {
            "model_patterns": forms.Textarea(attrs={"rows": 4}),
            "tool_patterns": forms.Textarea(attrs={"rows": 3}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = ", ".join(_tool_names())
        self.fields[
            "tool_patterns"
        ].help_text = f"One tool name or pattern a line, of: {names} (* for all). Empty: no tool."

    def clean_tool_patterns(self) -> str:
        text: str = self.cleaned_data["tool_patterns"]
        names = _tool_names()
        unknown = [
            p
            for p in patterns(text)
            if mcp_catalog.SEPARATOR not in p and not any(fnmatchcase(n, p) for n in names)
        ]
        if unknown:
            raise forms.ValidationError(
                f"No tool is named {', '.join(unknown)[:200]}: the tools are {', '.join(names)}."
            )
        return text


class GroupPolicyInline(_PolicyInline):
    model = GroupPolicy
    form = GroupPolicyForm
    max_num = 1  # one policy per group
    verbose_name = "policy (what the members may use)"
    verbose_name_plural = "policy (none: the members may use every model and tool)"


class GroupLimitForm(SpendingLimitForm):
    class Meta(SpendingLimitForm.Meta):
        fields = ("unit", "period", "amount", "unknown_price")


class GroupLimitInline(_LimitInline):
    """The group's budgets, shared by its members (`spending_limits`)."""

    model = SpendingLimit
    form = GroupLimitForm
    fk_name = "group"
    extra = 0
    verbose_name = "spending limit shared by the members"
    verbose_name_plural = "spending limits shared by the members"


class GroupAdmin(DjangoGroupAdmin):
    inlines = [GroupPolicyInline, GroupLimitInline]
    list_display = ("name", "policy", "members")

    @admin.display(description="policy")
    def policy(self, obj: Group) -> str:
        found = GroupPolicy.objects.filter(group=obj).first()
        if found is None:
            return "none: every model and tool"
        models = ", ".join(patterns(found.model_patterns)) or "no model"
        return f"models: {models[:120]}"

    @admin.display(description="members")
    def members(self, obj: Group) -> int:
        return obj.user_set.count()


admin.site.unregister(Group)
admin.site.register(Group, GroupAdmin)
