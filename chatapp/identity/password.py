"""A signed-in user's password change: Django's view and form, in the app's page, with the old
password's check counted against the account like a sign-in (`login_limits`): otherwise a
borrowed session could guess the password here without limit.

Offered only to an account with a usable password while password sign-in is on: an account made
by single sign-on has none, and its password is the provider's business.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponseBase
from django.urls import reverse_lazy

from chatapp.access import login_limits


def offered(user: Any) -> bool:
    return bool(
        settings.CHAT_PASSWORD_SIGN_IN and user.is_authenticated and user.has_usable_password()
    )


class PasswordChange(auth_views.PasswordChangeView):
    form_class = login_limits.LimitedPasswordChangeForm
    template_name = "registration/password_change.html"
    success_url = reverse_lazy("password_change_done")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not offered(request.user):
            raise Http404("This account has no password here.")
        return super().dispatch(request, *args, **kwargs)


change = PasswordChange.as_view()
done = auth_views.PasswordChangeDoneView.as_view(template_name="registration/password_changed.html")


def context(request: HttpRequest) -> dict[str, Callable[[], bool]]:
    """A template context processor: whether the user menu offers a password change. A callable,
    which the template calls only where it asks: reading `request.user` loads the session, and a
    page that never shows the menu (a shared link's) must not vary by cookie for it."""
    return {"password_change": lambda: offered(request.user)}
