"""App config for the chat app."""

from __future__ import annotations

from django.apps import AppConfig


class ChatappConfig(AppConfig):
    name = "chatapp"
    verbose_name = "Chat"
