"""A gateway's key stays the gateway's: a staff user who may edit gateways can neither have the
server read an environment variable the operator did not set aside for keys (the review sent
`DJANGO_SUPERUSER_PASSWORD` to a server of its own as the bearer token), nor move the stored key
to another server by changing only the base URL.

Checked where the admin takes the name (a clear error) and where the key is read
(`key_vault.resolve`), so a row written some other way cannot read it either.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from chatapp.gateways import configs, key_vault
from chatapp.gateways.models import Gateway

FORBIDDEN = [
    "DJANGO_SUPERUSER_PASSWORD",
    "DJANGO_SECRET_KEY",
    "DATABASE_URL",
    "LLM_API_KEY",  # the default gateway's key: another row must not carry it elsewhere
    "GATEWAY_KEY",  # the prefix is GATEWAY_KEY_
    "gateway_key_numes",
    "PATH",
]
STORED = "sk-stored-for-numes"
FORM = {
    "name": "Numes",
    "base_url": "https://numes.example/api/v1",
    "dialect": "numes",
    "cost_unit": "usd",
    "enabled": "on",
    "api_key_env": "",
}


@pytest.fixture
def numes(db: None) -> Gateway:
    return Gateway.objects.create(
        name="Numes",
        base_url=FORM["base_url"],
        dialect="numes",
        cost_unit="usd",
        api_key_encrypted=key_vault.encrypt(STORED),
    )


@pytest.fixture
def staff(django_user_model: Any) -> Client:
    """A staff user who may view, add and change gateways, and nothing else."""
    user = django_user_model.objects.create_user("staff", password="x", is_staff=True)
    codenames = ("view_gateway", "add_gateway", "change_gateway")
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def _change(numes: Gateway) -> str:
    return reverse("admin:chatapp_gateway_change", args=[numes.pk])


@pytest.mark.parametrize("name", FORBIDDEN)
def test_the_admin_refuses_a_variable_not_set_aside_for_keys(
    staff: Client, numes: Gateway, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "hunter2-secret")
    for url in (_change(numes), reverse("admin:chatapp_gateway_add")):
        data = {**FORM, "name": "Mine", "base_url": "https://attacker.example/v1"}
        response = staff.post(url, {**data, "api_key_env": name})
        assert response.status_code == 200, url  # the form again, with the error
        page = response.content.decode()
        assert (
            f"The environment variable {name} may not hold a gateway key: only GATEWAY_KEY_* "
            "may (CHAT_KEY_ENV_ALLOWED)."
        ) in page
        assert "hunter2-secret" not in page
    numes.refresh_from_db()
    assert numes.api_key_env == ""
    assert numes.base_url == FORM["base_url"]
    assert Gateway.objects.count() == 1


def test_the_admin_takes_a_variable_set_aside_for_keys(staff: Client, numes: Gateway) -> None:
    response = staff.post(_change(numes), {**FORM, "api_key_env": "GATEWAY_KEY_NUMES"})
    assert response.status_code == 302
    numes.refresh_from_db()
    assert numes.api_key_env == "GATEWAY_KEY_NUMES"


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_row_written_otherwise_still_cannot_read_it(
    numes: Gateway, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "hunter2-secret")
    Gateway.objects.filter(pk=numes.pk).update(api_key_env=name)
    numes.refresh_from_db()
    with pytest.raises(key_vault.KeyUnavailable, match=f"{name} may not hold a gateway key"):
        key_vault.resolve(numes.api_key_encrypted, numes.api_key_env)
    with pytest.raises(key_vault.KeyUnavailable):
        configs.resolve(numes)
    found, _ = configs.configs(force=True)
    assert numes.pk not in found  # unusable, and logged as such: never sent


def test_the_operator_decides_what_is_set_aside(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CHAT_KEY_ENV_ALLOWED = ("NUMES_API_KEY", "VAULT_*")
    monkeypatch.setenv("NUMES_API_KEY", "sk-a")
    monkeypatch.setenv("VAULT_OSMEXO", "sk-b")
    monkeypatch.setenv("GATEWAY_KEY_NUMES", "sk-c")
    assert key_vault.resolve("", "NUMES_API_KEY") == "sk-a"
    assert key_vault.resolve("", "VAULT_OSMEXO") == "sk-b"
    for name in ("GATEWAY_KEY_NUMES", "NUMES_API_KEY_2", "VAULT"):
        with pytest.raises(key_vault.KeyUnavailable, match="only NUMES_API_KEY, VAULT_\\* may"):
            key_vault.resolve("", name)


def test_a_new_base_url_clears_the_stored_key_saying_so(staff: Client, numes: Gateway) -> None:
    moved = {**FORM, "base_url": "https://attacker.example/v1"}
    response = staff.post(_change(numes), moved, follow=True)
    assert response.status_code == 200
    assert "The base URL changed, so the stored API key was cleared" in response.content.decode()
    numes.refresh_from_db()
    assert numes.base_url == moved["base_url"]
    assert numes.api_key_encrypted == ""
    with pytest.raises(key_vault.KeyUnavailable, match="no API key is configured"):
        configs.resolve(numes)  # so nothing is sent to the new URL until a key is entered


def test_a_new_base_url_with_a_new_key_keeps_the_new_key(staff: Client, numes: Gateway) -> None:
    moved = {**FORM, "base_url": "https://numes.example/api/v2", "api_key": "sk-new"}
    response = staff.post(_change(numes), moved, follow=True)
    assert "stored API key was cleared" not in response.content.decode()
    numes.refresh_from_db()
    assert key_vault.decrypt(numes.api_key_encrypted) == "sk-new"


def test_other_changes_keep_the_stored_key(staff: Client, numes: Gateway) -> None:
    response = staff.post(_change(numes), {**FORM, "name": "Numes (EU)"}, follow=True)
    assert "stored API key was cleared" not in response.content.decode()
    numes.refresh_from_db()
    assert numes.name == "Numes (EU)"
    assert key_vault.decrypt(numes.api_key_encrypted) == STORED


def test_a_new_base_url_clears_the_key_variable_saying_so(
    staff: Client, numes: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_KEY_NUMES", "sk-env-for-numes")
    numes.api_key_encrypted, numes.api_key_env = "", "GATEWAY_KEY_NUMES"
    numes.save()
    moved = {**FORM, "base_url": "https://attacker.example/v1", "api_key_env": "GATEWAY_KEY_NUMES"}
    response = staff.post(_change(numes), moved, follow=True)
    assert "the API key environment variable was cleared" in response.content.decode()
    numes.refresh_from_db()
    assert (numes.base_url, numes.api_key_env) == (moved["base_url"], "")
    with pytest.raises(key_vault.KeyUnavailable, match="no API key is configured"):
        configs.resolve(numes)  # the variable's key is not sent to the new URL


def test_a_new_base_url_with_a_new_key_variable_keeps_it(staff: Client, numes: Gateway) -> None:
    numes.api_key_env = "GATEWAY_KEY_NUMES"
    numes.save()
    moved = {**FORM, "base_url": "https://numes.example/v2", "api_key_env": "GATEWAY_KEY_NUMES2"}
    response = staff.post(_change(numes), moved, follow=True)
    assert "environment variable was cleared" not in response.content.decode()
    numes.refresh_from_db()
    assert numes.api_key_env == "GATEWAY_KEY_NUMES2"
    response = staff.post(_change(numes), {**moved, "name": "Numes (EU)"}, follow=True)
    numes.refresh_from_db()
    assert numes.api_key_env == "GATEWAY_KEY_NUMES2"  # other changes keep it
