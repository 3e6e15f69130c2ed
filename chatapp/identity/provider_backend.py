"""Sign-in with the OpenID Connect provider: mozilla-django-oidc's backend, with the checks it
leaves out and the app's own account rules.

The library runs the authorization code flow (state, nonce and the PKCE verifier kept in the
session, the code exchanged at the token endpoint, the ID token's RS256 signature checked with
the provider's JWKS). Its `_verify_jws` decodes with `verify_aud: False` and no issuer, so this
backend decodes with PyJWT asking for both: the audience must include our client ID, the issuer
must be the configured one, and `exp`, `iat` and `sub` must be present (PyJWT refuses an expired
token by default). The endpoints come from discovery (`chatapp.identity.discovery`), asked only
when someone signs in: this backend is also built for every request that reads a session it
signed in (`get_user`), which must not touch the network.

Accounts: a returning user is the one linked to the token's (`iss`, `sub`) (`ProviderIdentity`);
a new subject gets a new account, with no usable password, unless `CHAT_OIDC_LINK_BY_EMAIL`
lets a verified e-mail take over an existing account an admin made (`linking.account_for`). Name and
e-mail follow the provider's claims at each sign-in; groups follow its groups claim
(`provider_groups.sync`).
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from chatapp.identity import discovery, linking, provider_groups

logger = logging.getLogger(__name__)

REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]
LEEWAY = 30  # seconds of clock difference allowed with the provider


class ProviderBackend(OIDCAuthenticationBackend):  # type: ignore[misc]  # untyped library
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's: it reads every endpoint from settings, which we fill from discovery.
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    def get_user(self, user_id: Any) -> Any:
        """Django's, which refuses an inactive user: the library's returns any user, so a session
        signed in through the provider would outlive a deactivation (and its sockets with it)."""
        return ModelBackend.get_user(self, user_id)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if request is None or "code" not in request.GET:
            return None  # a password form's call, not ours
        found = discovery.endpoints()
        self.issuer = found.issuer
        self.OIDC_OP_TOKEN_ENDPOINT = found.token
        self.OIDC_OP_USER_ENDPOINT = found.userinfo
        self.OIDC_OP_JWKS_ENDPOINT = found.jwks
        return super().authenticate(request, **kwargs)

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"The ID token is signed with {header.get('alg')!r}.")
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=self.issuer,
                leeway=LEEWAY,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.InvalidTokenError as exc:
            # PyJWT's messages name the check ("Signature has expired", "Audience doesn't
            # match"), never the token.
            raise SuspiciousOperation(f"The ID token was refused: {exc}") from exc
        return claims

    def get_or_create_user(
        self, access_token: str, id_token: str, payload: dict[str, Any]
    ) -> User | None:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload["sub"]:
            # OpenID Connect Core 5.3.2: userinfo about another subject must not be used.
            raise SuspiciousOperation("The userinfo response is about another subject.")
        claims = {**payload, **userinfo}
        with transaction.atomic():
            user = linking.account_for(self.issuer, claims)
            linking.update_profile(user, claims)
            claim = settings.CHAT_OIDC_GROUPS_CLAIM
            if claim:
                provider_groups.sync(user, provider_groups.names_from(claims.get(claim)))
        return user
