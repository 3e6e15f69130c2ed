"""A user's saved prompts, on their Settings page (`/settings/prompts/`): listed with the shared
ones they may use; their own are added, changed and deleted here (the shared ones are the admin's,
in the Django admin). The composer's `/` menu reads them from the page (`menu_entries`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chatapp import shared_cache
from chatapp.assistants import sharing
from chatapp.assistants.models import Prompt
from chatapp.assistants.prompt_text import MAX_TEXT_CHARS, PromptEntry, variables

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.authenticated import AuthenticatedRequest

MENU_LENGTH = 100
MENU_CHARS = 200_000
"""The `/` menu comes with every chat page: at most this many prompts, and as many of their
characters (those past it are left out, by name)."""


class PromptForm(forms.Form):
    name = forms.SlugField(
        label="Name",
        max_length=50,
        help_text="Typed as /name in an empty message box: letters, digits, - and _.",
        error_messages={
            "required": "Give the prompt a name.",
            "invalid": "A name is letters, digits, - and _ only (e.g. summarize).",
        },
    )
    text = forms.CharField(
        label="Text",
        max_length=MAX_TEXT_CHARS,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="Write {{name}} where something should be asked for when it is inserted, "
        "e.g. Translate into {{language}}: {{text}}",
        error_messages={"required": "Write the prompt's text."},
    )

    def __init__(self, *args: Any, owner: User, editing: Prompt | None = None, **kwargs: Any):
        kwargs.setdefault("label_suffix", "")
        kwargs.setdefault("auto_id", "prompt-%s")
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.editing = editing

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"]).lower()
        taken = Prompt.objects.filter(owner=self.owner, name=name)
        if self.editing is not None:
            taken = taken.exclude(pk=self.editing.pk)
        if taken.exists():
            raise forms.ValidationError(f"You have a prompt named /{name} already.")
        return name

    def save_prompt(self, row: Prompt) -> None:
        row.name = self.cleaned_data["name"]
        row.text = self.cleaned_data["text"]
        row.save()


def menu_entries(user: User) -> list[PromptEntry]:
    """The prompts the composer's `/` menu offers `user`, by name: their own, then the shared
    ones they may use whose name they have not taken; kept until one changes
    (`shared_cache`)."""
    return list(shared_cache.cached(("prompt_menu", user.pk), lambda: _menu_entries(user)))


def _menu_entries(user: User) -> list[PromptEntry]:
    rows = sharing.visible(Prompt, user).only("name", "text", "owner")[: 2 * MENU_LENGTH]
    entries: dict[str, PromptEntry] = {}
    budget = MENU_CHARS
    for row in sorted(rows, key=lambda row: (row.owner_id is None, row.name)):  # theirs first
        if row.name in entries or len(entries) >= MENU_LENGTH or len(row.text) > budget:
            continue
        budget -= len(row.text)
        entries[row.name] = PromptEntry(
            row.name, row.text, variables(row.text), row.owner_id is None
        )
    return sorted(entries.values(), key=lambda entry: entry.name)


def menu_data(user: User) -> list[dict[str, Any]]:
    """`menu_entries` as the page's JSON (`json_script`) for `prompts.js`."""
    return [
        {"name": e.name, "text": e.text, "variables": list(e.variables), "shared": e.shared}
        for e in menu_entries(user)
    ]


@login_required
@require_GET
def prompts(request: AuthenticatedRequest) -> HttpResponse:
    rows = list(sharing.visible(Prompt, request.user))
    context = {
        "own": [row for row in rows if row.owner_id],
        "shared": [row for row in rows if not row.owner_id],
    }
    return render(request, "chatapp/prompts.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def edit_prompt(request: AuthenticatedRequest, pk: int | None = None) -> HttpResponse:
    row = (
        Prompt(owner=request.user)
        if pk is None
        else get_object_or_404(sharing.own(Prompt, request.user), pk=pk)
    )
    editing = row if pk is not None else None
    if request.method == "POST":
        form = PromptForm(request.POST, owner=request.user, editing=editing)
        if form.is_valid():
            form.save_prompt(row)
            messages.success(request, f"Saved the prompt /{row.name}.")
            return HttpResponseRedirect(reverse("chat:prompts"))
    else:
        initial = {"name": row.name, "text": row.text} if editing else None
        form = PromptForm(initial=initial, owner=request.user, editing=editing)
    return render(request, "chatapp/prompt_form.html", {"form": form, "prompt": editing})


@login_required
@require_POST
def delete_prompt(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(sharing.own(Prompt, request.user), pk=pk)
    row.delete()
    messages.success(request, f"Deleted the prompt /{row.name}.")
    return HttpResponseRedirect(reverse("chat:prompts"))
