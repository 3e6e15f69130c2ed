"""The app's one exception hierarchy (the client library's is `gateway_client.errors`)."""

from __future__ import annotations


class ChatAppError(Exception):
    """Something the app refuses or cannot do, in words a user or operator can act on."""
