"""The two ends of a sign-in with the provider, and the page that says why one failed.

mozilla-django-oidc's views do the protocol; these subclasses take the authorization endpoint
from discovery and turn each way a sign-in can fail into a page that says so in words (status
400, or 502 when the provider could not be reached), where the library would raise (a 400 with
Django's bare "Bad Request", or a 500 for a provider that is down). A callback that does not end
a sign-in this browser started (no state, or one its session does not hold) changes nothing, and
a refusal from the provider signs nobody out. The log line says what failed but never carries a
token, a code or the client secret: only the check's own message.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from chatapp.identity import discovery

logger = logging.getLogger(__name__)

UNVERIFIED = "The provider's answer could not be verified, so you were not signed in."
REPLAYED = (
    "This sign-in was already used, or was started in another browser or too long ago. Start again."
)
UNREACHABLE = "The sign-in provider could not be reached. Try again in a moment."
UNAVAILABLE = (
    "Single sign-on is not available: the provider's configuration could not be read. "
    "Try again in a moment, or tell an administrator."
)
CANCELLED = "The sign-in was cancelled or refused by the provider."
INACTIVE = "Your account is deactivated. Ask an administrator."


def failed(request: HttpRequest, reason: str, status: int = 400) -> HttpResponse:
    return render(
        request,
        "registration/sign_in_failed.html",
        {"reason": reason, "label": settings.CHAT_OIDC_LABEL},
        status=status,
    )


class SignInStart(OIDCAuthenticationRequestView):  # type: ignore[misc]  # untyped library
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django's View.__init__, not the library's, which reads the endpoint from settings.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            self.OIDC_OP_AUTH_ENDPOINT = discovery.endpoints().authorization
        except discovery.DiscoveryError as exc:
            logger.warning("Single sign-on: %s", exc)
            return failed(request, UNAVAILABLE, status=502)
        response: HttpResponse = super().get(request)
        return response


class SignInCallback(OIDCAuthenticationCallbackView):  # type: ignore[misc]  # untyped library
    def get(self, request: HttpRequest) -> HttpResponse:
        state = request.GET.get("state")
        states = request.session.get("oidc_states", {})
        if state is None or state not in states:
            # Not the end of a sign-in this browser started: a replay, or a link from another
            # site. It changes nothing, the session it finds included.
            logger.warning("Single sign-on: a callback with no, an unknown or a used state")
            return failed(request, REPLAYED)
        if request.GET.get("error"):
            logger.info("Single sign-on: the provider answered %r", request.GET["error"][:100])
            # The state is forgotten (no replay), and a signed-in user stays signed in: the
            # library signs them out for its session-refresh middleware, which we do not use,
            # and a page from elsewhere could start a sign-in the provider refuses.
            del states[state]
            request.session.modified = True
            return failed(request, CANCELLED)
        try:
            response: HttpResponse = super().get(request)
        except discovery.DiscoveryError as exc:
            logger.warning("Single sign-on: %s", exc)
            return failed(request, UNAVAILABLE, status=502)
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "?"
            logger.warning("Single sign-on: the token endpoint answered %s", status)
            return failed(request, UNVERIFIED)
        except requests.RequestException as exc:
            logger.warning("Single sign-on: %s", type(exc).__name__)
            return failed(request, UNREACHABLE, status=502)
        except (SuspiciousOperation, jwt.InvalidTokenError) as exc:
            # Ours and the library's checks raise the first; a token PyJWT cannot even parse
            # (in the library's key lookup), the second.
            logger.warning("Single sign-on: %s", exc)
            return failed(request, UNVERIFIED)
        return response

    def login_failure(self) -> HttpResponse:
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            return failed(self.request, INACTIVE, status=403)
        return failed(self.request, UNVERIFIED)
