"""A user's assistants, on their Settings page (`/settings/assistants/`): listed with the shared
ones they may use, each with "Start a chat"; their own are added, changed and deleted here (the
shared ones are the admin's, in the Django admin). Only the owner's rows are looked up for a
change, so another user's assistant is a 404.

An assistant's form is the answer settings form with a name, a line saying what it is for and a
model, chosen from the picker's list (`catalog`, narrowed to the models the user's groups allow:
`group_policies.catalog_for`), or none: then a chat started with it goes to whatever the picker
shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chatapp.access import group_policies
from chatapp.access.shared_or_own import visible_to
from chatapp.assistants import sharing
from chatapp.assistants.models import Assistant
from chatapp.conversations.request_options import FIELDS, options_for, summary
from chatapp.gateways.catalog import GatewayModels, catalog, choice_value, parse_choice
from chatapp.knowledge.models import Collection
from chatapp.views.answer_settings import AnswerSettingsForm

if TYPE_CHECKING:
    from chatapp.authenticated import AuthenticatedRequest

PICKER_MODEL = "The model the picker shows"


class AssistantForm(AnswerSettingsForm):
    """An assistant's name, what it is for, its model and its answer settings."""

    name = forms.CharField(
        label="Name",
        max_length=100,
        error_messages={"required": "Give the assistant a name."},
    )
    description = forms.CharField(
        label="What it is for",
        required=False,
        max_length=200,
        help_text="Optional; shown when it is chosen.",
    )
    model = forms.ChoiceField(
        label="Model",
        required=False,
        help_text="What a chat started with it goes to (it can still be changed there).",
        error_messages={"invalid_choice": "Choose a model from the list."},
    )
    collections = forms.ModelMultipleChoiceField(
        label="Collections",
        queryset=Collection.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Every answer in a chat started with it draws on these, as if chosen with #.",
        error_messages={"invalid_choice": "Choose collections from the list."},
    )

    def __init__(
        self, *args: Any, groups: list[GatewayModels], current: str = "", **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        choices: list[Any] = [("", PICKER_MODEL)]
        listed: set[str] = set()
        for group in groups:
            options = [(choice.value, choice.label) for choice in group.choices]
            listed.update(value for value, _ in options)
            if options:
                choices.append((group.config.name, options))
        if current and current not in listed:  # kept while its gateway does not list it
            _, model = parse_choice(current)
            choices.append((current, f"{model} (not listed now)"))
        field = self.fields["model"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices
        offered = self.fields["collections"]
        assert isinstance(offered, forms.ModelMultipleChoiceField)
        if self.user_pk is not None:  # those the user may use, theirs and shared with them
            visible = Collection.objects.filter(visible_to(User(pk=self.user_pk))).values("pk")
            offered.queryset = Collection.objects.filter(pk__in=visible).order_by("name", "pk")

    @classmethod
    def for_row(cls, row: Assistant, groups: list[GatewayModels], user_pk: int) -> AssistantForm:
        value = _picker_value(row)
        initial = {name: getattr(row, name) for name in FIELDS}
        initial |= {"name": row.name, "description": row.description, "model": value}
        if row.pk is not None:
            initial["collections"] = list(row.collections.values_list("pk", flat=True))
        return cls(initial=initial, groups=groups, current=value, user_pk=user_pk)

    def save_assistant(self, row: Assistant) -> None:
        for name in FIELDS:
            setattr(row, name, self.cleaned_data[name])
        row.name = self.cleaned_data["name"].strip()
        row.description = self.cleaned_data["description"].strip()
        gateway_pk, model = parse_choice(self.cleaned_data["model"])
        row.gateway_id, row.model = (gateway_pk, model) if model else (None, "")
        row.save()
        row.collections.set(self.cleaned_data["collections"])


def _picker_value(row: Assistant) -> str:
    return choice_value(row.gateway_id, row.model) if row.gateway_id and row.model else ""


def _list(request: AuthenticatedRequest) -> HttpResponse:
    rows = list(sharing.visible(Assistant, request.user).prefetch_related("groups"))
    context = {
        "own": [
            (row, summary(options_for(row), None, request.user.pk)) for row in rows if row.owner_id
        ],
        "shared": [
            (row, summary(options_for(row), None, request.user.pk))
            for row in rows
            if not row.owner_id
        ],
    }
    return render(request, "chatapp/assistants.html", context)


@login_required
@require_GET
def assistants(request: AuthenticatedRequest) -> HttpResponse:
    return _list(request)


def _edit(
    request: AuthenticatedRequest, pk: int | None, groups: list[GatewayModels]
) -> HttpResponse:
    groups = group_policies.catalog_for(group_policies.access_for(request.user.pk), groups)
    row = (
        Assistant(owner=request.user)
        if pk is None
        else get_object_or_404(sharing.own(Assistant, request.user), pk=pk)
    )
    if request.method == "POST":
        form = AssistantForm(
            request.POST, groups=groups, current=_picker_value(row), user_pk=request.user.pk
        )
        if form.is_valid():
            form.save_assistant(row)
            messages.success(request, f"Saved the assistant {row.name}.")
            return HttpResponseRedirect(reverse("chat:assistants"))
    else:
        form = AssistantForm.for_row(row, groups, request.user.pk)
    context = {"settings_form": form, "assistant": row if pk else None}
    return render(request, "chatapp/assistant_form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
async def new_assistant(request: AuthenticatedRequest) -> HttpResponse:
    return await sync_to_async(_edit)(request, None, await catalog())


@login_required
@require_http_methods(["GET", "POST"])
async def edit_assistant(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    return await sync_to_async(_edit)(request, pk, await catalog())


@login_required
@require_POST
def delete_assistant(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Delete the user's assistant; the conversations started with it keep its name."""
    row = get_object_or_404(sharing.own(Assistant, request.user), pk=pk)
    row.delete()
    messages.success(request, f"Deleted the assistant {row.name}.")
    return HttpResponseRedirect(reverse("chat:assistants"))
