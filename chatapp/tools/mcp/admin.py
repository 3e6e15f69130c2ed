"""The admin of MCP servers: where each is, its headers (write-only, stored encrypted like a
gateway's key), who may use it, and what it last listed or why it cannot be used.

Saving a server, and the "Refresh" action, list its tools at once: the admin's request waits on
its own thread (Django gives each request under ASGI its own) while the listings run side by
side on the event loop, all within `CHAT_MCP_CONNECT_TIMEOUT`, so a server that does not answer
costs the admin that long and nobody else anything.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import orjson
from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from chatapp.gateways import key_vault
from chatapp.tools.mcp import catalog
from chatapp.tools.models import McpServer

if TYPE_CHECKING:
    _McpServerAdmin = admin.ModelAdmin[McpServer]
    _McpServerForm = forms.ModelForm[McpServer]
else:
    _McpServerAdmin = admin.ModelAdmin
    _McpServerForm = forms.ModelForm

_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_REFUSED_HEADERS = frozenset({"host", "content-length", "content-type", "accept", "connection"})
MAX_HEADER_VALUE = 4_096


def parsed_headers(text: str) -> dict[str, str]:
    """`Name: value` lines as headers; `ValidationError` naming the line that is not one."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _HEADER_NAME.match(name):
            raise forms.ValidationError(f"Line {number} is not a header (Name: value).")
        if name.lower() in _REFUSED_HEADERS:
            raise forms.ValidationError(f"The {name} header is the transport's own to set.")
        if not value or len(value) > MAX_HEADER_VALUE or not value.isprintable():
            raise forms.ValidationError(f"The value of {name} is empty, too long or not text.")
        headers[name] = value
    return headers


class McpServerForm(_McpServerForm):
    """Headers are write-only: never rendered back, kept when left blank, cleared when the URL
    changes without them (they were typed for the old server)."""

    bearer_token = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Sent as Authorization: Bearer …, stored encrypted.",
    )
    headers = forms.CharField(
        label="Other headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="One per line, Name: value; stored encrypted, never shown again. Leave both "
        "blank to keep the stored headers.",
    )
    clear_headers = forms.BooleanField(label="Clear the stored headers", required=False)

    class Meta:
        model = McpServer
        fields = ("name", "prefix", "url", "transport", "enabled", "groups")

    HEADERS_CLEARED = (
        "The URL changed, so the stored headers were cleared (they are never sent to another "
        "server unasked): enter them again."
    )
    headers_cleared = False

    def clean_headers(self) -> dict[str, str]:
        return parsed_headers(self.cleaned_data.get("headers", ""))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        new = cleaned.get("headers") or cleaned.get("bearer_token")
        if new and cleaned.get("clear_headers"):
            raise forms.ValidationError("Enter new headers or clear the stored ones, not both.")
        return cleaned

    def save(self, commit: bool = True) -> McpServer:
        server = super().save(commit=False)
        headers: dict[str, str] = dict(self.cleaned_data.get("headers") or {})
        if token := self.cleaned_data.get("bearer_token"):
            headers["Authorization"] = f"Bearer {token}"
        url_changed = bool(self.instance.pk and "url" in self.changed_data)
        if headers:
            server.headers_encrypted = key_vault.encrypt(orjson.dumps(headers).decode())
        elif self.cleaned_data.get("clear_headers") or (url_changed and server.headers_encrypted):
            self.headers_cleared = url_changed and not self.cleaned_data.get("clear_headers")
            server.headers_encrypted = ""
        if url_changed:  # the old server's tools are not this one's
            server.tools, server.problem, server.checked_at = [], "", None
        if commit:
            server.save()
            self.save_m2m()
        return server


@admin.register(McpServer)
class McpServerAdmin(_McpServerAdmin):
    form = McpServerForm
    # No "enabled" column: the state says "turned off", and the state must fit at 1280 px.
    list_display = ("name", "url", "transport", "who", "state", "tool_count")
    list_filter = ("enabled", "transport")
    search_fields = ("name", "url")
    filter_horizontal = ("groups",)
    readonly_fields = ("stored_headers", "state", "checked_at", "listed_tools", "created_at")
    actions = ("refresh_tools",)

    class Media:
        css = {"all": ("chatapp/admin_mcp.css",)}

    fieldsets = (
        (None, {"fields": ("name", "prefix", "url", "transport", "enabled", "groups")}),
        (
            "Headers",
            {"fields": ("stored_headers", "bearer_token", "headers", "clear_headers")},
        ),
        ("Tools", {"fields": ("state", "checked_at", "listed_tools")}),
        (None, {"fields": ("created_at",)}),
    )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        if getattr(form, "headers_cleared", False):
            messages.warning(request, McpServerForm.HEADERS_CLEARED)
        server = form.instance
        if server.enabled:
            self._refresh(request, [server])

    def _refresh(self, request: HttpRequest, servers: list[McpServer]) -> None:
        problems = async_to_sync(catalog.refresh_all)([server.pk for server in servers])
        for server, problem in zip(servers, problems, strict=True):
            if problem:
                messages.warning(request, f"{server.name}: its tools are unavailable: {problem}.")
            else:
                server.refresh_from_db(fields=["tools"])
                count = len(server.tools)
                messages.success(request, f"{server.name}: {count} tool(s) listed.")

    @admin.action(description="Refresh the selected servers' tool lists", permissions=["change"])
    def refresh_tools(self, request: HttpRequest, queryset: Any) -> None:
        self._refresh(request, list(queryset))

    @admin.display(description="may use it")
    def who(self, obj: McpServer) -> str:
        names = [group.name for group in obj.groups.all()]
        return ", ".join(names) if names else "everyone"

    @admin.display(description="headers in use")
    def stored_headers(self, obj: McpServer) -> str:
        if not obj.headers_encrypted:
            return "none"
        try:
            names = sorted(orjson.loads(key_vault.decrypt(obj.headers_encrypted)))
        except key_vault.KeyUnavailable as exc:
            return f"stored, but unreadable: {exc}"
        return f"stored (encrypted): {', '.join(names)}"

    @admin.display(description="state")
    def state(self, obj: McpServer) -> str:
        if not obj.enabled:
            return "turned off"
        if obj.problem:
            return f"unavailable: {obj.problem}"
        return "usable" if obj.checked_at else "not listed yet"

    @admin.display(description="tools")
    def tool_count(self, obj: McpServer) -> int:
        return len(obj.tools) if isinstance(obj.tools, list) else 0

    @admin.display(description="tools listed")
    def listed_tools(self, obj: McpServer) -> str:
        tools = catalog.server_tools(obj) if obj.pk else []
        if not tools:
            return "none"
        rows = format_html_join(
            "", "<li><code>{}</code>: {}</li>", ((tool.name, tool.about) for tool in tools)
        )
        return format_html("<ul>{}</ul>", rows)
