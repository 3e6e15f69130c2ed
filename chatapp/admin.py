"""The admin: conversations, gateways with write-only keys, model prices and the tool switches.
The cost ledger (generations, the summary, the CSV export) is `costs/admin/generations.py`'s,
registered from here. Each package's admin is its `admin.py` (`admin/` where there are several)."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.utils import timezone

from chatapp import shared_cache, tools
from chatapp.access import admin as access_admin  # noqa: F401  (registers GroupAdmin)
from chatapp.assistants import admin as assistants_admin  # noqa: F401  (assistants and prompts)
from chatapp.assistants.models import ChatDefaults
from chatapp.conversations.models import Conversation, Message
from chatapp.costs.admin import feedback as feedback_admin  # noqa: F401  (registers FeedbackAdmin)
from chatapp.costs.admin import generations as generations_admin  # noqa: F401  (GenerationAdmin)
from chatapp.costs.admin import limits as limits_admin  # noqa: F401  (SpendingLimitAdmin)
from chatapp.costs.admin.amounts import TRIMMED_DECIMALS
from chatapp.costs.models import Generation
from chatapp.gateways import configs, detected, key_vault
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways.units import CostUnit, Money
from chatapp.identity import admin as identity_admin  # noqa: F401  (registers its admins)
from chatapp.knowledge import admin as knowledge_admin  # noqa: F401  (collections)
from chatapp.knowledge import reembedding
from chatapp.tools.mcp import admin as mcp_admin  # noqa: F401  (registers McpServerAdmin)
from chatapp.tools.mcp import catalog as mcp_catalog
from chatapp.tools.models import ToolSwitch
from gateway_client.dialects import facts_for

if TYPE_CHECKING:  # generic in django-stubs only: Django's admin classes are not subscriptable
    _MessageInline = admin.TabularInline[Message, Conversation]
    _ConversationAdmin = admin.ModelAdmin[Conversation]
    _MessageAdmin = admin.ModelAdmin[Message]
    _GenerationAdmin = admin.ModelAdmin[Generation]
    _GatewayAdmin = admin.ModelAdmin[Gateway]
    _ModelPriceAdmin = admin.ModelAdmin[ModelPrice]
    _GatewayForm = forms.ModelForm[Gateway]
    _ChatDefaultsAdmin = admin.ModelAdmin[ChatDefaults]
    _ToolSwitchAdmin = admin.ModelAdmin[ToolSwitch]
else:
    _ChatDefaultsAdmin = _ToolSwitchAdmin = admin.ModelAdmin
    _MessageInline = admin.TabularInline
    _ConversationAdmin = _MessageAdmin = _GenerationAdmin = admin.ModelAdmin
    _GatewayAdmin = _ModelPriceAdmin = admin.ModelAdmin
    _GatewayForm = forms.ModelForm


# What a generation's answer said and asked is its record, as its cost is (the ledger): an
# admin does not rewrite it, nor move a conversation, and its generations, to another owner.
ANSWER_RECORD = (
    "conversation",
    "role",
    "parent",
    "content",
    "reasoning",
    "reasoning_details",
    "tool_calls",
    "annotations",
    "attachments",
)


class MessageInline(_MessageInline):
    model = Message
    fields = ("role", "content", "created_at")
    readonly_fields = ("role", "content", "created_at")  # edited one by one, on its own page
    extra = 0
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Conversation | None = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(_ConversationAdmin):
    list_display = ("__str__", "user", "gateway", "model", "created_at", "updated_at")
    list_filter = ("gateway", "model")
    search_fields = ("title", "user__username")
    raw_id_fields = ("user",)
    list_select_related = ("user", "gateway")
    inlines = [MessageInline]

    def get_readonly_fields(self, request: HttpRequest, obj: Conversation | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        return fields if obj is None else (*fields, "user")


@admin.register(Message)
class MessageAdmin(_MessageAdmin):
    list_display = ("id", "conversation", "role", "short_content", "created_at")
    list_filter = ("role",)
    search_fields = ("content",)
    raw_id_fields = ("conversation",)
    # The stored render is a cache of the record, served as it is: never written here.
    exclude = ("html", "html_key")

    def get_readonly_fields(self, request: HttpRequest, obj: Message | None = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        answered = obj is not None and (
            Generation.objects.filter(message=obj).exists() or obj.read_alouds.exists()
        )
        return (*fields, *ANSWER_RECORD) if answered else fields

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]


@admin.register(ChatDefaults)
class ChatDefaultsAdmin(_ChatDefaultsAdmin):
    """Each user's settings for new conversations (a user edits theirs at `/settings/`)."""

    list_display = ("user", "temperature", "max_tokens", "reasoning_effort", "has_system_prompt")
    search_fields = ("user__username",)
    raw_id_fields = ("user",)
    list_select_related = ("user",)

    @admin.display(description="system prompt", boolean=True)
    def has_system_prompt(self, obj: ChatDefaults) -> bool:
        return bool(obj.system_prompt)


@admin.register(ToolSwitch)
class ToolSwitchAdmin(_ToolSwitchAdmin):
    """Every built-in tool and every tool an MCP server listed, on or off for everyone: a row per
    tool, made when the list is shown (a tool without one is on), so turning one off is a tick
    and Save."""

    list_display = ("name", "title", "enabled", "updated_at")
    list_display_links = None
    list_editable = ("enabled",)
    actions = ("turn_off", "turn_on")

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if self.has_change_permission(request):
            names = [*tools.registry(), *(tool.name for tool in mcp_catalog.all_tools())]
            rows = [ToolSwitch(name=name) for name in names]
            ToolSwitch.objects.bulk_create(rows, ignore_conflicts=True)
        return super().changelist_view(request, extra_context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the tools are the registry's; their rows are made above

    @admin.display(description="tool")
    def title(self, obj: ToolSwitch) -> str:
        tool = tools.registry().get(obj.name)
        if tool is not None:
            return tool.title
        mcp_tool = next((t for t in self._mcp_tools() if t.name == obj.name), None)
        if mcp_tool is not None:
            return f"{mcp_tool.title} (MCP server {mcp_tool.server_name})"
        if mcp_catalog.SEPARATOR in obj.name:
            return "(no longer listed by an MCP server)"
        return "(no longer built in)"

    def _mcp_tools(self) -> list[mcp_catalog.McpTool]:
        return mcp_catalog.all_tools()

    @admin.action(description="Turn the selected tools off", permissions=["change"])
    def turn_off(self, request: HttpRequest, queryset: Any) -> None:
        queryset.update(enabled=False, updated_at=timezone.now())
        shared_cache.changed()  # an update sends no signal

    @admin.action(description="Turn the selected tools on", permissions=["change"])
    def turn_on(self, request: HttpRequest, queryset: Any) -> None:
        queryset.update(enabled=True, updated_at=timezone.now())
        shared_cache.changed()  # an update sends no signal


# --- Gateways and prices ----------------------------------------------------------------------


def _in_unit(amount: Decimal, unit: str) -> str:
    """A price as an amount in its gateway's unit, as costs read ("$0.0001708", "120 sat")."""
    return str(Money(amount, CostUnit(unit))) if unit in CostUnit.values else f"{amount:f}"


class GatewayForm(_GatewayForm):
    """The key is write-only: never rendered back (not even masked), kept when left blank."""

    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted. Leave blank to keep the stored key.",
    )
    clear_api_key = forms.BooleanField(label="Clear the stored key", required=False)
    reembed = forms.BooleanField(
        label="Embed the documents again at this cost",
        required=False,
        help_text="Asked when a new embedding model would embed documents again: saving says "
        "what it will cost first.",
    )

    class Meta:
        model = Gateway
        fields = (
            "name",
            "base_url",
            "dialect",
            "cost_unit",
            "enabled",
            "api_key_env",
            "speech_model",
            "speech_voice",
            "transcription_model",
            "title_model",
            "embedding_model",
        )

    # The stored key was typed for the old base URL: a new URL would be sent it unasked.
    KEY_CLEARED = (
        "The base URL changed, so the stored API key was cleared (it is never sent to another "
        "server unasked): enter the key again."
    )
    # Likewise the variable: its key is the old server's.
    ENV_CLEARED = (
        "The base URL changed, so the API key environment variable was cleared (its key is never "
        "sent to another server unasked): name it again."
    )

    key_cleared = False
    env_cleared = False
    reembedding: reembedding.ReembeddingEstimate | None = None
    """What the save embeds again (the admin confirmed it), or None."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        admitted = ", ".join(settings.CHAT_KEY_ENV_ALLOWED) or "none"
        hint = (
            f"Read the key from this environment variable instead of storing it: {admitted}. "
            "A new base URL clears it unless it is changed in the same save."
        )
        self.fields["api_key_env"].help_text = hint
        if self.instance.pk and (said := detected.described(self.instance)):
            # The blank choice says what it stands for on this gateway.
            dialect = self.fields["dialect"]
            assert isinstance(dialect, forms.ChoiceField)
            dialect.choices = [("", f"auto-detect ({said})"), *Gateway.Dialect.choices[1:]]

    def clean_base_url(self) -> str:
        base_url: str = self.cleaned_data.get("base_url", "")
        if problem := configs.base_url_problem(base_url, emulated=self.instance.emulated):
            raise forms.ValidationError(f"{problem[:1].upper()}{problem[1:]}.")
        return base_url

    def clean_api_key_env(self) -> str:
        name: str = self.cleaned_data.get("api_key_env", "")
        if name and not key_vault.env_allowed(name):
            refusal = key_vault.env_refusal(name)
            raise forms.ValidationError(f"{refusal[:1].upper()}{refusal[1:]}.")
        return name

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("api_key") and cleaned.get("clear_api_key"):
            raise forms.ValidationError("Enter a new key or clear the stored one, not both.")
        self.reembedding = None
        model = cleaned.get("embedding_model") or ""
        if self.instance.pk and model and "embedding_model" in self.changed_data:
            unit = cleaned.get("cost_unit") or self.instance.cost_unit
            found = reembedding.estimate(self.instance.pk, unit, model)
            if found.files and not cleaned.get("reembed"):
                self.add_error("reembed", f"{found} Tick this box to go ahead.")
            self.reembedding = found if found.files else None
        return cleaned

    @property
    def key_cleared_by_new_url(self) -> bool:
        """Saving drops the stored key: the base URL changed and no new key came with it."""
        return bool(
            self.instance.pk
            and self.instance.api_key_encrypted
            and "base_url" in self.changed_data
            and not self.cleaned_data.get("api_key")
        )

    @property
    def env_cleared_by_new_url(self) -> bool:
        """Saving drops the key's variable: the base URL changed and the variable did not."""
        return bool(
            self.instance.pk
            and self.initial.get("api_key_env")
            and "base_url" in self.changed_data
            and "api_key_env" not in self.changed_data
        )

    def save(self, commit: bool = True) -> Gateway:
        self.key_cleared = self.key_cleared_by_new_url  # the admin then says so (`save_model`)
        self.env_cleared = self.env_cleared_by_new_url
        gateway = super().save(commit=False)
        if self.env_cleared:
            gateway.api_key_env = ""
        if "base_url" in self.changed_data:  # the old server's detection: ask the new one
            gateway.detected_dialect = gateway.detection_note = ""
        if self.cleaned_data.get("clear_api_key") or self.key_cleared:
            gateway.api_key_encrypted = ""
        elif key := self.cleaned_data.get("api_key"):
            gateway.api_key_encrypted = key_vault.encrypt(key)
        if commit:
            gateway.save()
        return gateway


@admin.register(Gateway)
class GatewayAdmin(_GatewayAdmin):
    form = GatewayForm
    list_display = (
        "name",
        "base_url",
        "speaks",
        "cost_unit",
        "enabled",
        "emulated",
        "key",
        "usable",
    )
    list_filter = ("enabled", "dialect", "cost_unit")
    search_fields = ("name", "base_url")
    readonly_fields = ("emulated", "key", "usable", "created_at")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "base_url",
                    "dialect",
                    "cost_unit",
                    "enabled",
                    "emulated",
                    "usable",
                )
            },
        ),
        ("API key", {"fields": ("key", "api_key", "clear_api_key", "api_key_env")}),
        ("Read aloud", {"fields": ("speech_model", "speech_voice")}),
        ("Voice input", {"fields": ("transcription_model",)}),
        ("Titles", {"fields": ("title_model",)}),
        ("Knowledge", {"fields": ("embedding_model", "reembed")}),
        (None, {"fields": ("created_at",)}),
    )

    def save_model(self, request: HttpRequest, obj: Gateway, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if getattr(form, "key_cleared", False):
            messages.warning(request, GatewayForm.KEY_CLEARED)
        if getattr(form, "env_cleared", False):
            messages.warning(request, GatewayForm.ENV_CLEARED)
        if (estimate := getattr(form, "reembedding", None)) is not None:
            queued = reembedding.start_reembedding(obj.pk)
            messages.info(request, f"{estimate} {reembedding.documents(len(queued))} queued.")

    @admin.display(description="dialect", ordering="dialect")
    def speaks(self, obj: Gateway) -> str:
        if obj.dialect:
            return obj.get_dialect_display()
        facts = facts_for(obj.detected_dialect)
        return f"{facts.title} (detected)" if facts is not None else "auto-detect"

    @admin.display(description="usable")
    def usable(self, obj: Gateway) -> str:
        """ "yes", or why not: a row that cannot be resolved is left out of the picker."""
        if obj.pk is None:
            return "-"
        problem = configs.unusable_reason(obj)
        return "yes" if problem is None else f"no: {problem}"

    @admin.display(description="key in use")
    def key(self, obj: Gateway) -> str:
        if obj.api_key_env:
            return f"from ${obj.api_key_env}"
        return "stored (encrypted)" if obj.api_key_encrypted else "none"

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[Any, Any], set[Any], list[Any]]:
        # A gateway with history is disabled, not deleted (the foreign keys PROTECT it). Say so
        # with counts: Django's default would load and list every protected generation.
        generations = Generation.objects.filter(gateway__in=objs).count()
        conversations = Conversation.objects.filter(gateway__in=objs).count()
        if generations or conversations:
            protected = [
                f"{generations:,} generation(s) and {conversations:,} conversation(s) "
                "that keep their cost history: disable the gateway instead"
            ]
            return [], {}, set(), protected
        return super().get_deleted_objects(objs, request)


@admin.register(ModelPrice)
class ModelPriceAdmin(_ModelPriceAdmin):
    list_display = ("gateway", "model", "prompt_price", "completion_price", "source", "updated_at")
    list_filter = ("gateway", "source")
    search_fields = ("model",)
    readonly_fields = ("source", "updated_at")
    list_select_related = ("gateway",)
    formfield_overrides = TRIMMED_DECIMALS

    @admin.display(description="per prompt token", ordering="prompt")
    def prompt_price(self, obj: ModelPrice) -> str:
        return _in_unit(obj.prompt, obj.gateway.cost_unit)

    @admin.display(description="per completion token", ordering="completion")
    def completion_price(self, obj: ModelPrice) -> str:
        return _in_unit(obj.completion, obj.gateway.cost_unit)

    def save_model(self, request: HttpRequest, obj: ModelPrice, form: Any, change: Any) -> None:
        # A price an admin saved is theirs: a gateway's /models listing no longer overwrites it.
        obj.source = ModelPrice.Source.ADMIN
        super().save_model(request, obj, form, change)


# --- The cost ledger --------------------------------------------------------------------------
