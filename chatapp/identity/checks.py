"""System checks of the sign-in settings: a server nobody can sign in to, a provider without its
client secret, and (with `--deploy`) a provider reached over plain HTTP."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register


@register(Tags.security)
def sign_in_settings(**kwargs: Any) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    if not settings.CHAT_PASSWORD_SIGN_IN and not settings.CHAT_OIDC:
        found.append(
            Error(
                "CHAT_PASSWORD_SIGN_IN is off and single sign-on is not configured: "
                "nobody can sign in.",
                hint="Set CHAT_OIDC_ISSUER and CHAT_OIDC_CLIENT_ID, or CHAT_PASSWORD_SIGN_IN=1.",
                id="chatapp.E101",
            )
        )
    if settings.CHAT_OIDC and not settings.OIDC_RP_CLIENT_SECRET:
        found.append(
            Error(
                "Single sign-on is on but CHAT_OIDC_CLIENT_SECRET is empty.",
                hint="The app is a confidential client: set the secret the provider gave it.",
                id="chatapp.E102",
            )
        )
    return found


@register(Tags.security, deploy=True)
def provider_over_https(**kwargs: Any) -> list[CheckMessage]:
    if settings.CHAT_OIDC and not settings.CHAT_OIDC_ISSUER.startswith("https://"):
        return [
            Warning(
                "CHAT_OIDC_ISSUER is not an https:// URL: the client secret, the tokens and the "
                "keys that verify them would cross the network unprotected.",
                id="chatapp.W101",
            )
        ]
    return []
