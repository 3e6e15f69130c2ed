"""Editing answer settings: a conversation's, from its header; a new chat's, beside its composer;
and a user's defaults for new chats, on their own page (`/settings/`).

All three use one form whose fields are the model's, with messages that say what to type. The
header's form posts with htmx and gets its part of the header back: closed, with the line of what
now applies, once saved; open with the errors when not. Every row is looked up by `request.user`,
so another user's conversation is a 404.

A new chat has no row to save to until its first message makes one, so its Settings are fields of
the composer's form, starting from the user's defaults: they go with the first message, which
makes the conversation with them (`chosen_options`), and the draft and the model picked stay put
while they are changed. The defaults are not touched. Each change asks for the line of what
applies again (`new_chat_settings`), which saves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from chatapp import tools
from chatapp.assistants.models import AnswerSettings, ChatDefaults
from chatapp.conversations.models import Conversation
from chatapp.conversations.request_options import (
    EFFORT_SENT_TO,
    FIELDS,
    RequestOptions,
    chat_defaults,
    dialect_of,
    options_for,
    summary,
)
from chatapp.conversations.turns import MAX_MESSAGE_CHARS, TurnError
from chatapp.gateways.catalog import parse_choice
from chatapp.tools.mcp import catalog as mcp_catalog

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.authenticated import AuthenticatedRequest

MAX_TOKENS = 1_000_000

_TEMPERATURE = "Temperature is a number from 0 to 2, in steps of 0.1 (e.g. 0.7)."
_MAX_TOKENS = f"Max tokens is a whole number from 1 to {MAX_TOKENS:,}."


class ToolsField(forms.MultipleChoiceField):
    """The tools to offer, as checkboxes of those an admin has not switched off. A name that is
    not among them (unknown, or switched off since the page was shown) is dropped, not an error:
    nothing the user could correct."""

    widget = forms.CheckboxSelectMultiple

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offered: list[tools.Tool] = []

    def offer(self, offered: list[tools.Tool]) -> None:
        self.offered = offered
        self.choices = [(tool.name, tool.title) for tool in offered]

    def validate(self, value: Any) -> None:
        pass

    def clean(self, value: Any) -> list[str]:
        chosen = set(super().clean(value))
        return [tool.name for tool in self.offered if tool.name in chosen]


@dataclass(frozen=True, slots=True)
class ToolGroup:
    """The tools of one source in Settings → Tools: `server` "" for the built-ins, else an MCP
    server's name, with its `problem` ("" when its tools can be called)."""

    server: str
    problem: str
    options: list[tuple[Any, str]]


SYSTEM_PROMPT_PLACEHOLDER = "Optional, e.g. Answer briefly, in plain English."


class AnswerSettingsForm(forms.Form):
    """The `AnswerSettings` fields; empty ones leave the value to the gateway."""

    system_prompt = forms.CharField(
        label="System prompt",
        required=False,
        max_length=MAX_MESSAGE_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": SYSTEM_PROMPT_PLACEHOLDER}),
        help_text="Sent before the conversation, as its system message.",
        error_messages={
            "max_length": f"The system prompt is too long (at most {MAX_MESSAGE_CHARS:,} "
            "characters)."
        },
    )
    temperature = forms.FloatField(
        label="Temperature",
        required=False,
        min_value=0,
        max_value=2,
        step_size=0.1,
        widget=forms.NumberInput(attrs={"placeholder": "Default"}),
        help_text="0 to 2: lower is more focused, higher more varied.",
        error_messages={
            key: _TEMPERATURE for key in ("invalid", "min_value", "max_value", "step_size")
        },
    )
    max_tokens = forms.IntegerField(
        label="Max tokens",
        required=False,
        min_value=1,
        max_value=MAX_TOKENS,
        widget=forms.NumberInput(attrs={"placeholder": "Default"}),
        help_text="Thinking counts too: give a reasoning model at least 2,048.",
        error_messages={key: _MAX_TOKENS for key in ("invalid", "min_value", "max_value")},
    )
    reasoning_effort = forms.ChoiceField(
        label="Reasoning effort",
        required=False,
        choices=AnswerSettings.ReasoningEffort.choices,
        help_text=f"Sent to {EFFORT_SENT_TO} only: "
        "the other gateways document no reasoning control.",
        error_messages={"invalid_choice": "Choose a reasoning effort from the list."},
    )
    tools = ToolsField(
        label="Tools",
        required=False,
        help_text="The model may call these while it answers.",
    )

    def __init__(self, *args: Any, user_pk: int | None, **kwargs: Any) -> None:
        """`user_pk`: whose settings: the tools offered are those their groups allow, and the MCP
        servers' they may use (None: every tool)."""
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("auto_id", "settings-%s")
        super().__init__(*args, **kwargs)
        self.user_pk = user_pk
        self.tools_field.offer(tools.choosable(user_pk))  # reads the switches and the servers

    @property
    def tools_field(self) -> ToolsField:
        field = self.fields["tools"]
        assert isinstance(field, ToolsField)
        return field

    @cached_property
    def tool_groups(self) -> list[ToolGroup]:
        """The checkboxes grouped as Settings → Tools shows them: the built-ins, then each MCP
        server's (every text in them is the server's, shown escaped by the template), then each
        server with no tool to choose that cannot be asked now, with why."""
        groups: list[ToolGroup] = []
        for box, tool in zip(self["tools"], self.tools_field.offered, strict=True):
            server = getattr(tool, "server_name", "")
            if not groups or groups[-1].server != server:
                groups.append(ToolGroup(server, getattr(tool, "problem", ""), []))
            groups[-1].options.append((box, tool.about))
        # A server that lists no tool (never reached, say) still says it is unavailable.
        toolless = mcp_catalog.toolless_problems(self.user_pk)
        groups += [ToolGroup(name, problem, []) for name, problem in toolless.items()]
        return groups

    @classmethod
    def of(cls, row: AnswerSettings, user_pk: int | None) -> AnswerSettingsForm:
        """An unbound form showing `row`'s values."""
        return cls(initial={name: getattr(row, name) for name in FIELDS}, user_pk=user_pk)

    def options(self) -> RequestOptions:
        """The valid form's values as the options a request is sent with."""
        values = {name: self.cleaned_data[name] for name in FIELDS}
        values["tools"] = tuple(values["tools"])
        return RequestOptions(**values)

    def first_error(self) -> str:
        """The invalid form's first problem, in the words its field says it with."""
        return str(next(message for messages in self.errors.values() for message in messages))

    def save_to(self, row: AnswerSettings) -> None:
        for name in FIELDS:
            setattr(row, name, self.cleaned_data[name])
        if isinstance(row, ChatDefaults):  # two first saves at once make one row, not a 500
            values = {name: getattr(row, name) for name in FIELDS}
            ChatDefaults.objects.update_or_create(user=row.user, defaults=values)
        else:  # not `updated_at`: a conversation does not move up the sidebar for its settings
            row.save(update_fields=FIELDS)


def header_context(
    conversation: Conversation, form: AnswerSettingsForm | None = None
) -> dict[str, Any]:
    """What `_answer_settings.html` shows for `conversation`: its form (`form`, when bound with
    errors, is shown open) and the line of what applies on its gateway."""
    options = options_for(conversation)
    return {
        "conversation": conversation,
        "settings_form": form or AnswerSettingsForm.of(conversation, conversation.user_id),
        "settings_open": form is not None and bool(form.errors),
        "settings_applied": summary(
            options, dialect_of(conversation.gateway_id), conversation.user_id
        ),
        "settings_default": options.is_default,
        "tools_on": bool(options.tools and tools.offered(options.tools, conversation.user_id)),
    }


NEW_CHAT_FIELD = "new_chat_settings"
"""Posted by a new chat's composer along with its Settings' fields: they, not the user's defaults,
make the conversation."""


def chosen_options(data: QueryDict, user_pk: int) -> RequestOptions | None:
    """The settings a new chat's composer posts with its first message; None when it posts none
    (the user's defaults then apply), `TurnError` in words when they are not valid. Reads the tool
    switches: call off the event loop."""
    if data.get(NEW_CHAT_FIELD) != "1":
        return None
    form = AnswerSettingsForm(data, user_pk=user_pk)
    if not form.is_valid():
        raise TurnError(form.first_error())
    return form.options()


def _dialect_picked(picker_value: str) -> str | None:
    """The dialect of the gateway of the model picked (None: none is, so no gateway in
    particular)."""
    gateway_pk, model = parse_choice(picker_value)
    return dialect_of(gateway_pk) if model and gateway_pk is not None else None


def new_chat_context(
    user: User, picker_value: str, row: AnswerSettings | None = None
) -> dict[str, Any]:
    """What `_new_chat_settings.html` shows: the form, as `row` (an assistant chosen) or else the
    user's defaults fill it, and the line of what they apply with the model picked
    (`picker_value`)."""
    if row is None:
        row = chat_defaults(user) or ChatDefaults(user=user)
    options = options_for(row)
    return {
        "settings_form": AnswerSettingsForm.of(row, user.pk),
        "settings_applied": summary(options, _dialect_picked(picker_value), user.pk),
        "settings_default": options.is_default,
        "new_chat_field": NEW_CHAT_FIELD,
    }


@login_required
@require_POST
def new_chat_settings(request: AuthenticatedRequest) -> HttpResponse:
    """The line of what a new chat's Settings, as the composer posts them, apply (or what is wrong
    with them), for the model picked. Nothing is saved: they go with the first message."""
    form = AnswerSettingsForm(request.POST, user_pk=request.user.pk)
    if form.is_valid():
        options = form.options()
        picked = _dialect_picked(request.POST.get("model", ""))
        context = {
            "settings_applied": summary(options, picked, request.user.pk),
            "settings_default": options.is_default,
        }
    else:
        context = {"settings_error": form.first_error()}
    return render(request, "chatapp/_new_chat_applied.html", context)


@login_required
@require_POST
def conversation_settings(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    conversation = get_object_or_404(Conversation, pk=pk, user=request.user)
    form = AnswerSettingsForm(request.POST, user_pk=request.user.pk)
    if form.is_valid():
        form.save_to(conversation)
        if not request.htmx:
            return HttpResponseRedirect(reverse("chat:conversation", args=[pk]))
        return render(request, "chatapp/_answer_settings.html", header_context(conversation))
    return render(request, "chatapp/_answer_settings.html", header_context(conversation, form))


@login_required
@require_http_methods(["GET", "POST"])
def defaults(request: AuthenticatedRequest) -> HttpResponse:
    """The user's settings for new conversations."""
    row = ChatDefaults.objects.filter(user=request.user).first() or ChatDefaults(user=request.user)
    if request.method == "POST":
        form = AnswerSettingsForm(request.POST, user_pk=request.user.pk)
        if form.is_valid():
            form.save_to(row)
            messages.success(request, "Saved. New chats start with these settings.")
            return HttpResponseRedirect(reverse("chat:defaults"))
    else:
        form = AnswerSettingsForm.of(row, request.user.pk)
    applied = summary(options_for(row), None, request.user.pk)
    context = {"settings_form": form, "settings_applied": applied}
    return render(request, "chatapp/defaults.html", context)
