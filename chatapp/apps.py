"""App config for the chat app."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save, pre_delete


class ChatappConfig(AppConfig):
    name = "chatapp"
    verbose_name = "Chat"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model

        from chatapp import (
            checks,  # noqa: F401  (registers them)
            shared_cache,
        )
        from chatapp.accounts import checks as account_checks  # noqa: F401  (registers them)
        from chatapp.accounts import deactivation, sign_up
        from chatapp.costs.ledger import forget_read_aloud_audio
        from chatapp.gateways.configs import forget_configs
        from chatapp.gateways.detected import forget_asked
        from chatapp.models import Conversation, Gateway
        from chatapp.ws import session_sockets

        # An admin's change to a gateway takes effect at once in this process (in the others on
        # their next page, which checks the token `shared_cache` writes for it: `configs`).
        post_save.connect(forget_configs, sender=Gateway, dispatch_uid="chatapp.gateway.saved")
        post_delete.connect(forget_configs, sender=Gateway, dispatch_uid="chatapp.gateway.gone")
        post_save.connect(forget_asked, sender=Gateway, dispatch_uid="chatapp.gateway.ask")
        post_delete.connect(forget_asked, sender=Gateway, dispatch_uid="chatapp.gateway.unask")
        # What pages keep between requests is read again after a change, in every process.
        shared_cache.connect_signals()
        # A sign-out, a password change or a deactivation ends the user's sockets too.
        session_sockets.connect_signals()
        # A deactivation stops the user's running answers; an activation approves a sign-up.
        user_model = get_user_model()
        post_save.connect(
            deactivation.user_saved, sender=user_model, dispatch_uid="chatapp.accounts.deactivated"
        )
        post_save.connect(
            sign_up.approved, sender=user_model, dispatch_uid="chatapp.accounts.approved"
        )
        # A deleted conversation's text goes, and the audio of its read alouds with it (their
        # generations stay in the ledger).
        pre_delete.connect(
            forget_read_aloud_audio, sender=Conversation, dispatch_uid="chatapp.costs.ledger.audio"
        )
