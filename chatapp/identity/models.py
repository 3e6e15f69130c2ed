"""What the app records about accounts beyond `django.contrib.auth`'s user.

- `ProviderIdentity`: the link from a user to one subject at one OpenID Connect issuer. A
  returning user is found by this link (`iss`, `sub`: the pair the specification says is stable
  and unique), never by e-mail, which a provider may let its users change.
- `ProviderGroupMembership`: the groups a user is in because the provider's claim said so. Each
  sign-in adds and removes these, and only these: a membership an admin made by hand has no row
  here and is never removed by a sign-in.
- `PendingApproval`: a self-signed-up account waiting for an admin (inactive until approved).
  Its row is what tells "waiting" from "deactivated" (both are `is_active=False`).
- `SelfSignUp`: an account its owner made at the sign-up page, kept after approval. Its username
  and e-mail are what a stranger typed, never checked, so a provider's e-mail never links to it
  (`linking.by_email`).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models


class ProviderIdentity(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created = models.DateTimeField(auto_now_add=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "chatapp"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_user_per_subject")
        ]
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ProviderGroupMembership(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_groups"
    )
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="provider_members")

    class Meta:
        app_label = "chatapp"
        constraints = [
            models.UniqueConstraint(fields=["user", "group"], name="one_provider_membership")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.group} (from the provider)"


class PendingApproval(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pending_approval"
    )
    requested = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chatapp"
        verbose_name = "account waiting for approval"
        verbose_name_plural = "accounts waiting for approval"

    def __str__(self) -> str:
        return str(self.user)


class SelfSignUp(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="self_sign_up"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chatapp"
        verbose_name = "self-signed-up account"

    def __str__(self) -> str:
        return str(self.user)
