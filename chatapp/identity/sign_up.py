"""Self sign-up (off unless `CHAT_SIGN_UP`), and the page an account waiting for approval sees.

With `CHAT_SIGN_UP_APPROVAL` (the default when sign-up is on) a new account is made inactive with
a `PendingApproval` row, and its owner is shown that it waits; an admin approves it in the admin
(the "Approve" action on Accounts waiting for approval, or ticking Active on the user), which
deletes the row (`approved`). Without approval the new account is signed in at once. Either way
the account keeps a `SelfSignUp` row: its e-mail is unchecked, so no provider's e-mail links to it.
A username is one `usernames` accepts and no account has in any case. An address may make
`CHAT_LOGIN_FAILURES_PER_ACCOUNT` attempts that make an account or find the name taken per
`CHAT_LOGIN_WINDOW`, counted as sign-in failures are (`login_limits.sign_up_window`), so that one
client can neither fill the user table nor list the accounts that exist name by name.
"""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import BaseUserCreationForm
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from chatapp.access import login_limits
from chatapp.identity import usernames
from chatapp.identity.models import PendingApproval, SelfSignUp


class SignUpForm(BaseUserCreationForm):  # type: ignore[type-arg]
    email = forms.EmailField(required=False, help_text="Optional: for an admin to reach you.")

    class Meta(BaseUserCreationForm.Meta):
        fields = ("username", "email")

    def clean_username(self) -> str:
        return usernames.check(self.cleaned_data["username"])


def sign_up(request: HttpRequest) -> HttpResponse:
    if not (settings.CHAT_SIGN_UP and settings.CHAT_PASSWORD_SIGN_IN):
        raise Http404("Sign-up is off.")
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    if request.method != "POST":
        return render(request, "registration/sign_up.html", {"form": SignUpForm()})
    counter = login_limits.sign_up_window(login_limits.client_address(request))
    now = time.time()
    wait = counter.blocked_for(now)
    if wait:
        # Checked before the form: a refused attempt learns nothing of the name it asked for.
        form = SignUpForm(initial={"username": request.POST.get("username", "")})
        context = {"form": form, "throttled": login_limits.too_many(wait)}
        return render(request, "registration/sign_up.html", context)
    form = SignUpForm(request.POST)
    made = form.is_valid()
    if made or form.has_error("username", "taken"):
        counter.record_failure(now)
    if made:
        try:
            return created(request, form)
        except IntegrityError:  # another sign-up took the name (in some case) since the check
            form.add_error("username", ValidationError(usernames.TAKEN, code="taken"))
    return render(request, "registration/sign_up.html", {"form": form})


def created(request: HttpRequest, form: SignUpForm) -> HttpResponse:
    approval = settings.CHAT_SIGN_UP_APPROVAL
    with transaction.atomic():
        user = form.save(commit=False)
        user.is_active = not approval
        user.save()
        SelfSignUp.objects.create(user=user)
        if approval:
            PendingApproval.objects.create(user=user)
    if approval:
        return redirect("pending_approval")
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(settings.LOGIN_REDIRECT_URL)


def pending(request: HttpRequest) -> HttpResponse:
    return render(request, "registration/pending_approval.html")


def approved(sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """An account made active is approved: its waiting row goes (post_save on the user)."""
    if update_fields is not None and "is_active" not in update_fields:
        return  # a sign-in's last_login, a password: not an approval
    if instance.is_active:
        PendingApproval.objects.filter(user_id=instance.pk).delete()
