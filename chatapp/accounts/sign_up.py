"""Self sign-up (off unless `CHAT_SIGN_UP`), and the page an account waiting for approval sees.

With `CHAT_SIGN_UP_APPROVAL` (the default when sign-up is on) a new account is made inactive with
a `PendingApproval` row, and its owner is shown that it waits; an admin approves it in the admin
(the "Approve" action on Accounts waiting for approval, or ticking Active on the user), which
deletes the row (`approved`). Without approval the new account is signed in at once. Either way
the account keeps a `SelfSignUp` row: its e-mail is unchecked, so no provider's e-mail links to it.
An address may make `CHAT_LOGIN_FAILURES_PER_ACCOUNT` accounts per `CHAT_LOGIN_WINDOW`, counted
as sign-in failures are (`login_limits.Window`), so that one client cannot fill the user table.
"""

from __future__ import annotations

import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import BaseUserCreationForm
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from chatapp.access import login_limits
from chatapp.accounts.models import PendingApproval, SelfSignUp


class SignUpForm(BaseUserCreationForm):  # type: ignore[type-arg]
    email = forms.EmailField(required=False, help_text="Optional: for an admin to reach you.")

    class Meta(BaseUserCreationForm.Meta):
        fields = ("username", "email")


def sign_up(request: HttpRequest) -> HttpResponse:
    if not (settings.CHAT_SIGN_UP and settings.CHAT_PASSWORD_SIGN_IN):
        raise Http404("Sign-up is off.")
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    form = SignUpForm(request.POST or None)
    throttled = ""
    if request.method == "POST" and form.is_valid():
        counter = login_limits.windows(f"sign-up:{login_limits.client_address(request)}", None)[0]
        now = time.time()
        wait = counter.blocked_for(now)
        if wait:
            throttled = login_limits.too_many(wait)
        else:
            counter.record_failure(now)
            return created(request, form)
    return render(request, "registration/sign_up.html", {"form": form, "throttled": throttled})


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
