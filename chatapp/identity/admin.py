"""The admin's list of accounts waiting for approval, with the action that approves them, the
self-signed-up accounts (deleting one's row vouches for its e-mail, so that
`CHAT_OIDC_LINK_BY_EMAIL` may link it), and the single sign-on identities (an admin may link an
existing account to a subject before its owner first signs in with the provider). Django's user
pages check a username by the app's one rule (`usernames.check`), so an admin who names or renames
an account "ALICE" beside alice is told so instead of meeting the database's refusal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from chatapp.identity import usernames
from chatapp.identity.models import PendingApproval, ProviderIdentity, SelfSignUp

if TYPE_CHECKING:
    _PendingAdmin = admin.ModelAdmin[PendingApproval]
    _IdentityAdmin = admin.ModelAdmin[ProviderIdentity]
    _SelfSignUpAdmin = admin.ModelAdmin[SelfSignUp]
else:
    _PendingAdmin = _IdentityAdmin = _SelfSignUpAdmin = admin.ModelAdmin


@admin.register(PendingApproval)
class PendingApprovalAdmin(_PendingAdmin):
    list_display = ("user", "email", "requested")
    actions = ("approve",)

    @admin.display(description="E-mail")
    def email(self, row: PendingApproval) -> str:
        return row.user.email

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Approve the selected accounts", permissions=["change"])
    def approve(self, request: HttpRequest, queryset: QuerySet[PendingApproval]) -> None:
        with transaction.atomic():
            users = [row.user for row in queryset.select_related("user")]
            for user in users:
                user.is_active = True
                user.save(update_fields=["is_active"])  # `sign_up.approved` deletes the row
        self.message_user(
            request,
            f"Approved {len(users)} account{'s' if len(users) != 1 else ''}.",
            messages.SUCCESS,
        )


@admin.register(SelfSignUp)
class SelfSignUpAdmin(_SelfSignUpAdmin):
    list_display = ("user", "email", "created")
    search_fields = ("user__username", "user__email")

    @admin.display(description="E-mail")
    def email(self, row: SelfSignUp) -> str:
        return row.user.email

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(ProviderIdentity)
class ProviderIdentityAdmin(_IdentityAdmin):
    list_display = ("user", "subject", "issuer", "created", "last_sign_in")
    search_fields = ("user__username", "subject")
    raw_id_fields = ("user",)
    readonly_fields = ("created", "last_sign_in")


class AccountCreationForm(AdminUserCreationForm):  # type: ignore[type-arg]
    def clean_username(self) -> str:
        return usernames.check(self.cleaned_data["username"])


class AccountChangeForm(UserChangeForm):  # type: ignore[type-arg]
    def clean_username(self) -> str:
        return usernames.check(self.cleaned_data["username"], but=self.instance.pk)


class AccountAdmin(DjangoUserAdmin):  # type: ignore[type-arg]
    add_form = AccountCreationForm
    form = AccountChangeForm


admin.site.unregister(User)
admin.site.register(User, AccountAdmin)
