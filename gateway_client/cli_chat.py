"""`python -m gateway_client chat`: stream an answer to the terminal (written with the client)."""

from __future__ import annotations

from typing import Any


def add_chat_command(commands: Any) -> None:
    chat = commands.add_parser("chat", help="stream a chat answer from a gateway")
    chat.set_defaults(handler=lambda args: 2)
