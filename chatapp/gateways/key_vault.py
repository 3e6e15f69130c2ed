"""Gateway API keys at rest: Fernet (the `cryptography` package), never a home-made cipher.

The Fernet key is `CHAT_KEY_ENCRYPTION_KEY` when set (a urlsafe-base64 32-byte key, e.g. from
`Fernet.generate_key()`), else derived from `SECRET_KEY` with HKDF-SHA256, so a default install
encrypts without another secret to manage; rotating `SECRET_KEY` then means re-entering the keys.

A key named by environment variable is read only from a variable `CHAT_KEY_ENV_ALLOWED` admits
(`env_allowed`), checked here, where it is read, as well as in the admin's form: a row edited some
other way still cannot send `DJANGO_SUPERUSER_PASSWORD` to a gateway as its bearer token.
"""

from __future__ import annotations

import base64
import functools
import os

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from chatapp.errors import ChatAppError

__all__ = ["KeyUnavailable", "decrypt", "encrypt", "env_allowed", "env_refusal", "resolve"]


class KeyUnavailable(ChatAppError):
    """A gateway's key cannot be read (no key, a missing variable, or the wrong Fernet key)."""


def _fernet() -> Fernet:
    return _fernet_for(settings.CHAT_KEY_ENCRYPTION_KEY, settings.SECRET_KEY)


@functools.lru_cache(maxsize=4)
def _fernet_for(configured: str, secret_key: str) -> Fernet:
    if configured:
        return Fernet(configured)
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"chatapp gateway api keys"
    ).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(api_key: str) -> str:
    return _fernet().encrypt(api_key.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnavailable(
            "the stored API key cannot be decrypted (was SECRET_KEY or "
            "CHAT_KEY_ENCRYPTION_KEY changed?); enter it again in the admin"
        ) from None


def env_allowed(env_name: str) -> bool:
    """Whether a gateway may read its key from `env_name`: one of `CHAT_KEY_ENV_ALLOWED`'s
    names, or a name starting with one of its prefixes (written with a trailing `*`)."""
    for allowed in settings.CHAT_KEY_ENV_ALLOWED:
        prefix = allowed.removesuffix("*")
        if env_name == allowed or (
            allowed.endswith("*") and prefix and env_name.startswith(prefix)
        ):
            return True
    return False


def env_refusal(env_name: str) -> str:
    """Why `env_name` may not be read (the admin form's error, the log's warning)."""
    admitted = ", ".join(settings.CHAT_KEY_ENV_ALLOWED) or "none"
    return (
        f"the environment variable {env_name} may not hold a gateway key: only "
        f"{admitted} may (CHAT_KEY_ENV_ALLOWED)"
    )


def resolve(encrypted: str, env_name: str) -> str:
    """The key itself: from the named environment variable (if `env_allowed`), else the
    stored one."""
    if env_name:
        if not env_allowed(env_name):
            raise KeyUnavailable(env_refusal(env_name))
        value = os.environ.get(env_name, "")
        if not value:
            raise KeyUnavailable(f"the environment variable {env_name} is not set")
        return value
    if not encrypted:
        raise KeyUnavailable("no API key is configured")
    return decrypt(encrypted)
