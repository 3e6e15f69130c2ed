"""Local accounts and the account rules of single sign-on, through Django's test client:
passwords off, self sign-up with approval, the password change, groups from the provider's
claim, and which account a provider's subject signs in as (chatapp/identity)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from chatapp.identity import linking, provider_groups, usernames
from chatapp.identity.models import (
    PendingApproval,
    ProviderGroupMembership,
    ProviderIdentity,
    SelfSignUp,
)
from chatapp.identity.provider_views import CANCELLED, REPLAYED
from chatapp.identity.sign_in import PASSWORDS_OFF, WAITING

pytestmark = [pytest.mark.django_db]

PASSWORD = "a long enough password"
ISSUER = "https://login.example.test"


@pytest.fixture(autouse=True)
def fresh_counters() -> None:
    from django.core.cache import cache

    cache.clear()


def test_with_passwords_off_a_posted_password_is_refused(settings: Any) -> None:
    User.objects.create_user("olga", password=PASSWORD)
    settings.CHAT_PASSWORD_SIGN_IN = False
    response = Client().post(reverse("login"), {"username": "olga", "password": PASSWORD})
    assert response.status_code == 403
    assert PASSWORDS_OFF in response.content.decode()
    assert "_auth_user_id" not in response.client.session
    admin_page = Client().get("/admin/login/?next=/admin/")
    assert admin_page.status_code == 302
    assert admin_page["Location"] == f"{reverse('login')}?next=%2Fadmin%2F"


def test_with_passwords_on_the_admin_signs_in_with_its_own_form() -> None:
    assert 'name="password"' in Client().get("/admin/login/").content.decode()


def test_sign_up_is_off_by_default() -> None:
    assert Client().get(reverse("sign_up")).status_code == 404


def sign_up(client: Client, username: str) -> Any:
    return client.post(
        reverse("sign_up"),
        {"username": username, "email": "", "password1": PASSWORD, "password2": PASSWORD},
    )


def test_a_sign_up_waits_for_approval_and_then_signs_in(settings: Any) -> None:
    settings.CHAT_SIGN_UP = True
    client = Client()
    response = sign_up(client, "newcomer")
    assert response.status_code == 302
    assert response["Location"] == reverse("pending_approval")
    user = User.objects.get(username="newcomer")
    assert not user.is_active
    assert PendingApproval.objects.filter(user=user).exists()
    # The right password is told the account waits; a wrong one is told nothing of it.
    waiting = client.post(reverse("login"), {"username": "newcomer", "password": PASSWORD})
    assert escape(WAITING) in waiting.content.decode()
    wrong = client.post(reverse("login"), {"username": "newcomer", "password": "wrong one"})
    assert escape(WAITING) not in wrong.content.decode()
    # Typed as sign-in reads it (trimmed, NFKC: fullwidth letters), it is the same account.
    for typed in [" newcomer ", "\uff4eewcomer"]:
        same = client.post(reverse("login"), {"username": typed, "password": PASSWORD})
        assert escape(WAITING) in same.content.decode()
    # An admin ticks Active: approved, the waiting row goes, and the password signs in.
    user.is_active = True
    user.save()
    assert not PendingApproval.objects.filter(user=user).exists()
    signed_in = client.post(reverse("login"), {"username": "newcomer", "password": PASSWORD})
    assert signed_in.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)


def test_without_approval_a_sign_up_signs_in_at_once(settings: Any) -> None:
    settings.CHAT_SIGN_UP = True
    settings.CHAT_SIGN_UP_APPROVAL = False
    client = Client()
    response = sign_up(client, "quick")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(User.objects.get(username="quick").pk)


def test_sign_ups_from_one_address_are_limited(settings: Any) -> None:
    settings.CHAT_SIGN_UP = True
    settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT = 2
    client = Client()
    assert sign_up(client, "first").status_code == 302
    assert sign_up(client, "second").status_code == 302
    refused = sign_up(client, "third")
    assert refused.status_code == 200
    assert "Too many attempts" in refused.content.decode()
    assert not User.objects.filter(username="third").exists()


@pytest.mark.parametrize(
    "taken", ["ALICE", "Alice", "\uff41\uff4c\uff49\uff43\uff45", " alice ", "\u00c4lice"]
)
def test_a_username_taken_in_any_case_or_width_is_refused(settings: Any, taken: str) -> None:
    settings.CHAT_SIGN_UP = True
    User.objects.create_user("alice", password=PASSWORD)
    # Älice is älice in a case SQLite's own comparisons do not fold (ASCII letters alone).
    User.objects.create_user("\u00e4lice", password=PASSWORD)
    response = sign_up(Client(), taken)
    assert response.status_code == 200
    assert escape(usernames.TAKEN) in response.content.decode()
    assert User.objects.count() == 2


def test_the_database_refuses_a_username_that_differs_only_by_case() -> None:
    User.objects.create_user("dora")
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create_user("DORA")


@pytest.mark.parametrize("name", ["\u202enimda", "two words", "zero\u200bwidth", "x" * 151])
def test_sign_up_refuses_a_name_that_is_no_username(settings: Any, name: str) -> None:
    settings.CHAT_SIGN_UP = True
    response = sign_up(Client(), name)
    assert response.status_code == 200
    assert not User.objects.exists()


def test_the_admin_cannot_name_or_rename_an_account_to_anothers_name_in_another_case() -> None:
    admin = User.objects.create_superuser("root", password=PASSWORD)
    User.objects.create_user("alice")
    other = User.objects.create_user("alfie")
    client = Client()
    client.force_login(admin)
    added = client.post(
        "/admin/auth/user/add/",
        {"username": "ALICE", "usable_password": "false", "password1": "", "password2": ""},
    )
    assert added.status_code == 200
    assert escape(usernames.TAKEN) in added.content.decode()
    page = client.get(f"/admin/auth/user/{other.pk}/change/")
    form = {
        name: value
        for name, value in page.context["adminform"].form.initial.items()
        if name not in {"password", "groups", "user_permissions", "last_login"}
    }
    form |= {"username": "Alice", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    renamed = client.post(f"/admin/auth/user/{other.pk}/change/", form)
    assert renamed.status_code == 200
    assert escape(usernames.TAKEN) in renamed.content.decode()
    kept = client.post(f"/admin/auth/user/{other.pk}/change/", form | {"username": "ALFIE"})
    assert kept.status_code == 302  # its own name in another case is its own
    other.refresh_from_db()
    assert other.username == "ALFIE"


def test_asking_name_after_name_at_sign_up_is_limited_like_sign_in(settings: Any) -> None:
    """Each answer "taken" counts, as a made account does; once the address has had its
    attempts, every answer is the limit's, whether the name is free or taken."""
    settings.CHAT_SIGN_UP = True
    settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT = 3
    User.objects.create_user("admin", password=PASSWORD)
    client = Client()
    for guess in ["admin", "Admin", "ADMIN"]:
        assert escape(usernames.TAKEN) in sign_up(client, guess).content.decode()
    for guess in ["admin", "nobody-has-this"]:
        refused = sign_up(client, guess).content.decode()
        assert "Too many attempts" in refused
        assert escape(usernames.TAKEN) not in refused
    assert User.objects.count() == 1
    # Another address is not held back.
    other = Client(REMOTE_ADDR="192.0.2.9")
    assert sign_up(other, "nobody-has-this").status_code == 302


def test_a_sign_up_with_a_form_error_of_its_own_is_not_counted(settings: Any) -> None:
    settings.CHAT_SIGN_UP = True
    settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT = 1
    client = Client()
    form = {"username": "typo", "email": "", "password1": PASSWORD, "password2": "other"}
    for _ in range(3):
        assert "Too many attempts" not in client.post(reverse("sign_up"), form).content.decode()
    assert sign_up(client, "typo").status_code == 302


def test_sign_ups_from_one_ipv6_network_count_together(settings: Any) -> None:
    settings.CHAT_SIGN_UP = True
    settings.CHAT_LOGIN_FAILURES_PER_ACCOUNT = 1
    assert sign_up(Client(REMOTE_ADDR="2001:db8::1"), "first6").status_code == 302
    refused = sign_up(Client(REMOTE_ADDR="2001:db8::2"), "second6")
    assert "Too many attempts" in refused.content.decode()


def test_the_password_change_checks_the_old_password_and_changes_it() -> None:
    user = User.objects.create_user("pat", password=PASSWORD)
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat:home"))
    assert f'href="{reverse("password_change")}"' in page.content.decode()
    new = "another long password"
    form = {"old_password": "wrong", "new_password1": new, "new_password2": new}
    wrong = client.post(reverse("password_change"), form)
    assert "Your old password was entered incorrectly" in wrong.content.decode()
    done = client.post(reverse("password_change"), form | {"old_password": PASSWORD})
    assert done["Location"] == reverse("password_change_done")
    user.refresh_from_db()
    assert user.check_password(new)


def test_an_account_without_a_password_is_offered_no_change() -> None:
    user = User.objects.create_user("sso-only")
    user.set_unusable_password()
    user.save()
    client = Client()
    client.force_login(user)
    assert reverse("password_change") not in client.get(reverse("chat:home")).content.decode()
    assert client.get(reverse("password_change")).status_code == 404


def test_groups_follow_the_claim_but_an_admins_membership_stays() -> None:
    user = User.objects.create_user("gus")
    by_hand = Group.objects.create(name="Managers")
    user.groups.add(by_hand)
    provider_groups.sync(user, ["Research", "Ops"])
    assert set(user.groups.values_list("name", flat=True)) == {"Managers", "Research", "Ops"}
    provider_groups.sync(user, ["Research"])
    assert set(user.groups.values_list("name", flat=True)) == {"Managers", "Research"}
    provider_groups.sync(user, [])
    assert set(user.groups.values_list("name", flat=True)) == {"Managers"}
    assert not ProviderGroupMembership.objects.filter(user=user).exists()


def test_a_claim_names_groups_as_a_list_or_one_string() -> None:
    assert provider_groups.names_from(["a", " b ", "a", 3, ""]) == ["a", "b"]
    assert provider_groups.names_from("staff") == ["staff"]
    assert provider_groups.names_from({"a": 1}) == []
    assert provider_groups.names_from(None) == []


def claims(subject: str, **more: Any) -> dict[str, Any]:
    return {"sub": subject, "email": "ann@corp.test", "email_verified": True} | more


def test_a_subject_never_takes_over_a_local_account_by_email(settings: Any) -> None:
    local = User.objects.create_user("ann", email="ann@corp.test", password=PASSWORD)
    user = linking.account_for(ISSUER, claims("123", preferred_username="ann"))
    assert user.pk != local.pk
    assert user.username == "ann-2"
    assert not user.has_usable_password()
    # The next sign-in of the same subject is the same account, whatever its claims say.
    assert linking.account_for(ISSUER, claims("123", email="x@y.test")).pk == user.pk


def test_linking_by_email_takes_a_verified_match_when_allowed(settings: Any) -> None:
    settings.CHAT_OIDC_LINK_BY_EMAIL = True
    local = User.objects.create_user("ann", email="ANN@corp.test", password=PASSWORD)
    unverified = linking.account_for(ISSUER, claims("u1", email_verified=False))
    assert unverified.pk != local.pk
    assert linking.account_for(ISSUER, claims("v1")).pk == local.pk
    assert ProviderIdentity.objects.get(subject="v1").user == local


def made_by_sign_up(user: User) -> None:
    SelfSignUp.objects.create(user=user)


def waiting(user: User) -> None:
    SelfSignUp.objects.create(user=user)
    PendingApproval.objects.create(user=user)
    user.is_active = False
    user.save()


def deactivated(user: User) -> None:
    user.is_active = False
    user.save()


def staff(user: User) -> None:
    user.is_staff = True
    user.save()


def superuser(user: User) -> None:
    user.is_superuser = True
    user.save()


def linked_elsewhere(user: User) -> None:
    ProviderIdentity.objects.create(user=user, issuer="https://other.example.test", subject="o")


@pytest.mark.parametrize(
    "make_it", [made_by_sign_up, waiting, deactivated, staff, superuser, linked_elsewhere]
)
def test_linking_by_email_never_takes_an_account_an_admin_does_not_vouch_for(
    settings: Any, make_it: Any
) -> None:
    settings.CHAT_OIDC_LINK_BY_EMAIL = True
    local = User.objects.create_user("ann", email="ann@corp.test", password=PASSWORD)
    make_it(local)
    user = linking.account_for(ISSUER, claims("v2"))
    assert user.pk != local.pk
    assert user.username == "ann@corp.test"
    assert not user.has_usable_password()


def test_an_admin_vouches_for_a_signed_up_accounts_email_by_deleting_its_row(
    settings: Any,
) -> None:
    settings.CHAT_OIDC_LINK_BY_EMAIL = True
    local = User.objects.create_user("ann", email="ann@corp.test", password=PASSWORD)
    row = SelfSignUp.objects.create(user=local)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password=PASSWORD))
    listed = client.get("/admin/chatapp/selfsignup/")
    assert "ann@corp.test" in listed.content.decode()
    deleted = client.post(
        "/admin/chatapp/selfsignup/",
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )
    assert deleted.status_code == 302
    assert linking.account_for(ISSUER, claims("v3")).pk == local.pk


def test_a_signed_up_account_with_a_victims_email_is_not_handed_to_the_victim(
    settings: Any,
) -> None:
    """The pre-hijacking of #45: Mallory signs up as Ann's address and is approved; Ann's first
    sign-in with the provider gets an account of its own, not the one whose password Mallory
    holds. An admin-made account with the address is still linked: the sign-up cannot block it."""
    settings.CHAT_SIGN_UP = True
    settings.CHAT_OIDC_LINK_BY_EMAIL = True
    response = Client().post(
        reverse("sign_up"),
        {
            "username": "ann-at-work",
            "email": "ann@corp.test",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
    )
    assert response.status_code == 302
    planted = User.objects.get(username="ann-at-work")
    planted.is_active = True  # the admin approves it
    planted.save()
    ann = linking.account_for(ISSUER, claims("ann-subject", preferred_username="ann"))
    assert ann.pk != planted.pk
    assert not ann.has_usable_password()
    assert not ProviderIdentity.objects.filter(user=planted).exists()

    by_admin = User.objects.create_user("bea", email="bea@corp.test", password=PASSWORD)
    Client().post(
        reverse("sign_up"),
        {
            "username": "bea2",
            "email": "bea@corp.test",
            "password1": PASSWORD,
            "password2": PASSWORD,
        },
    )
    bea = linking.account_for(ISSUER, claims("bea-subject", email="bea@corp.test"))
    assert bea.pk == by_admin.pk


@pytest.mark.parametrize(
    "query",
    [
        "error=access_denied",  # a link from another site: no state at all
        "error=access_denied&state=not-this-browsers",
        "code=abc",
    ],
)
def test_a_callback_that_no_sign_in_of_this_browser_started_changes_nothing(query: str) -> None:
    user = User.objects.create_user("callee", password=PASSWORD)
    client = Client()
    client.force_login(user)
    response = client.get(f"/oidc/callback/?{query}")
    assert response.status_code == 400
    assert escape(REPLAYED) in response.content.decode()
    assert client.session["_auth_user_id"] == str(user.pk)


def test_a_refusal_by_the_provider_forgets_the_state_and_signs_nobody_out() -> None:
    user = User.objects.create_user("refused", password=PASSWORD)
    client = Client()
    client.force_login(user)
    session = client.session
    session["oidc_states"] = {"s1": {"nonce": "n", "code_verifier": "v", "added_on": 0}}
    session.save()
    response = client.get("/oidc/callback/?error=access_denied&state=s1")
    assert response.status_code == 400
    assert escape(CANCELLED) in response.content.decode()
    assert client.session["_auth_user_id"] == str(user.pk)
    assert client.session["oidc_states"] == {}
    assert escape(REPLAYED) in client.get("/oidc/callback/?error=x&state=s1").content.decode()


@pytest.mark.parametrize(
    ("given", "username"),
    [
        ({"preferred_username": "\uff4a\uff4f\uff45"}, "joe"),  # NFKC: fullwidth joe
        ({"preferred_username": "\u202enimda", "email": "eve@corp.test"}, "eve@corp.test"),
        ({"preferred_username": "Joe Bloggs", "email": "not an address"}, "s-42"),
        ({"preferred_username": "\u202e", "email": "", "sub": "auth0|42"}, "user"),
        ({"preferred_username": "x" * 151, "email": "long@corp.test"}, "long@corp.test"),
    ],
)
def test_a_providers_username_is_normalised_and_validated_like_sign_ups(
    given: dict[str, Any], username: str
) -> None:
    user = linking.account_for(ISSUER, {"sub": "s-42", **given})
    assert user.username == username


def test_a_providers_username_taken_in_another_case_gets_a_number() -> None:
    User.objects.create_user("joe")
    assert linking.account_for(ISSUER, {"sub": "j1", "preferred_username": "JOE"}).username == (
        "JOE-2"
    )
    User.objects.create_user("user")
    assert linking.account_for(ISSUER, {"sub": "|"}).username == "user-2"


def test_a_providers_names_lose_their_direction_marks_and_control_characters() -> None:
    user = User.objects.create_user("named")
    linking.update_profile(
        user,
        {"given_name": "\u202eEve\u202c", "family_name": "O\u2067ne\x07", "email": "e@x.test\n"},
    )
    user.refresh_from_db()
    assert (user.first_name, user.last_name, user.email) == ("Eve", "One", "e@x.test")


def test_a_session_signed_in_through_the_provider_ends_with_a_deactivation(settings: Any) -> None:
    from chatapp.identity.provider_backend import ProviderBackend

    backend = ProviderBackend()
    user = User.objects.create_user("sso-leaver")
    assert backend.get_user(user.pk) == user
    user.is_active = False
    user.save()
    assert backend.get_user(user.pk) is None
