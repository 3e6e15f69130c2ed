"""Gateway API keys at rest."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from chatapp.gateways import key_vault


def test_a_key_round_trips_and_is_not_stored_in_clear() -> None:
    token = key_vault.encrypt("sk-live-secret")
    assert "sk-live-secret" not in token
    assert key_vault.decrypt(token) == "sk-live-secret"
    assert key_vault.encrypt("sk-live-secret") != token, "Fernet tokens are salted"


def test_a_changed_secret_says_to_enter_the_key_again(settings: Any) -> None:
    token = key_vault.encrypt("sk-live-secret")
    settings.SECRET_KEY = "another-secret-key-" + "y" * 40
    with pytest.raises(key_vault.KeyUnavailable, match="enter it again in the admin"):
        key_vault.decrypt(token)


def test_an_explicit_fernet_key_is_used_when_set(settings: Any) -> None:
    settings.CHAT_KEY_ENCRYPTION_KEY = Fernet.generate_key().decode()
    token = key_vault.encrypt("k")
    assert Fernet(settings.CHAT_KEY_ENCRYPTION_KEY).decrypt(token.encode()) == b"k"


def test_a_key_can_come_from_a_named_environment_variable(monkeypatch: Any) -> None:
    monkeypatch.setenv("GATEWAY_KEY_NUMES_TEST", "sk-from-env")
    assert key_vault.resolve("", "GATEWAY_KEY_NUMES_TEST") == "sk-from-env"
    monkeypatch.delenv("GATEWAY_KEY_NUMES_TEST")
    with pytest.raises(key_vault.KeyUnavailable, match="GATEWAY_KEY_NUMES_TEST is not set"):
        key_vault.resolve("", "GATEWAY_KEY_NUMES_TEST")
    with pytest.raises(key_vault.KeyUnavailable, match="no API key"):
        key_vault.resolve("", "")
