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
            tools,
        )
        from chatapp.access.models import GroupPolicy
        from chatapp.assistants.models import Assistant, ChatDefaults, Prompt
        from chatapp.conversations import search_tool, tree
        from chatapp.conversations.models import Conversation
        from chatapp.costs import costing
        from chatapp.gateways import configs
        from chatapp.gateways.configs import forget_configs
        from chatapp.gateways.detected import forget_asked
        from chatapp.gateways.models import Gateway
        from chatapp.identity import checks as identity_checks  # noqa: F401  (registers them)
        from chatapp.identity import deactivation, sign_up
        from chatapp.knowledge.files import forget_collection
        from chatapp.knowledge.models import Collection
        from chatapp.read_aloud.models import forget_read_aloud_audio
        from chatapp.shared_cache.models import SharedVersion
        from chatapp.tools.models import McpServer, ToolSwitch
        from chatapp.ws import session_sockets

        # An estimate counts an answer's prompt from the context the tree reads (costs stand
        # below conversations).
        costing.read_contexts_with(tree.context_through)
        # The model's search of the user's conversations is a built-in tool (tools stand below
        # conversations).
        tools.add_built_in(search_tool.TOOL)
        # An admin's change to a gateway takes effect at once in this process, and in the others
        # on their next page: a save writes a new `SharedVersion` token (watched below), which
        # `configs` compares its cache with (it stands below shared_cache: the reader is passed).
        configs.check_versions_with(SharedVersion.current)
        post_save.connect(forget_configs, sender=Gateway, dispatch_uid="chatapp.gateway.saved")
        post_delete.connect(forget_configs, sender=Gateway, dispatch_uid="chatapp.gateway.gone")
        post_save.connect(forget_asked, sender=Gateway, dispatch_uid="chatapp.gateway.ask")
        post_delete.connect(forget_asked, sender=Gateway, dispatch_uid="chatapp.gateway.unask")
        # What pages keep between requests is read again after a change, in every process.
        shared_cache.connect_signals(
            watched=(Assistant, ChatDefaults, GroupPolicy, Prompt, ToolSwitch, McpServer, Gateway),
            shared_with_groups=(Assistant, Prompt, McpServer),
            # Which assistants draw on collections (`conversations/knowledge_choice.py`).
            relations=(Assistant.collections.through,),
        )
        # A sign-out, a password change or a deactivation ends the user's sockets too.
        session_sockets.connect_signals()
        # A deactivation stops the user's running answers; an activation approves a sign-up.
        user_model = get_user_model()
        post_save.connect(
            deactivation.user_saved, sender=user_model, dispatch_uid="chatapp.identity.deactivated"
        )
        post_save.connect(
            sign_up.approved, sender=user_model, dispatch_uid="chatapp.identity.approved"
        )
        # A deleted collection's vectors and text leave the stores, however it was deleted.
        pre_delete.connect(
            forget_collection, sender=Collection, dispatch_uid="chatapp.knowledge.vectors"
        )
        # A deleted conversation's text goes, and the audio of its read alouds with it (their
        # generations stay in the ledger).
        pre_delete.connect(
            forget_read_aloud_audio, sender=Conversation, dispatch_uid="chatapp.read_aloud.audio"
        )
