"""The sign-in page: the password form (unless `CHAT_PASSWORD_SIGN_IN` is off), the provider's
button when single sign-on is on, and the sign-up link when self sign-up is on.

With password sign-in off, a posted password is refused here whatever it is, and the admin's own
sign-in page sends people to this one: no form anywhere takes a password.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from chatapp.access.login_limits import LimitedAuthenticationForm
from chatapp.identity.models import PendingApproval

PASSWORDS_OFF = "Passwords are not accepted here. Sign in with the button below."
WAITING = "Your account is waiting for an administrator's approval."


class SignIn(LoginView):
    authentication_form = LimitedAuthenticationForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        return context | {
            "password_sign_in": settings.CHAT_PASSWORD_SIGN_IN,
            "provider_label": settings.CHAT_OIDC_LABEL if settings.CHAT_OIDC else "",
            "sign_up": settings.CHAT_SIGN_UP and settings.CHAT_PASSWORD_SIGN_IN,
        }

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.CHAT_PASSWORD_SIGN_IN:
            context = self.get_context_data(refusal=PASSWORDS_OFF)
            return self.render_to_response(context, status=403)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        """A waiting account with its right password is told that it waits (only its owner,
        who has just typed the password, learns that the account exists)."""
        user = getattr(form, "waiting_user", None)
        if user is None and not getattr(form, "throttled", ""):
            # The name as the form cleaned it (trimmed, NFKC), as `authenticate` looked it up.
            name = form.cleaned_data.get("username", "")
            user = waiting_account(name, form.data.get("password", ""))
        if user is not None:
            return self.render_to_response(self.get_context_data(form=form, refusal=WAITING))
        return super().form_invalid(form)


def waiting_account(username: str, password: str) -> Any:
    pending = (
        PendingApproval.objects.select_related("user")
        .filter(user__username=username, user__is_active=False)
        .first()
    )
    if pending is None or not pending.user.check_password(password):
        return None
    return pending.user


def admin_sign_in(request: HttpRequest) -> HttpResponse:
    """The admin's sign-in page; with passwords off, the app's, coming back to the admin."""
    if settings.CHAT_PASSWORD_SIGN_IN:
        response: HttpResponse = admin.site.login(request)
        return response
    target = request.GET.get("next") or reverse("admin:index")
    return HttpResponseRedirect(f"{reverse('login')}?{urlencode({'next': target})}")


sign_in = SignIn.as_view()
