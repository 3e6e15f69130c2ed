"""`{% answer_settings conversation %}`: the conversation header's "Settings" (its form and the
line of what applies), rendered the same on every page that shows a conversation as by the view
that saves them (`views/answer_settings.py`)."""

from __future__ import annotations

from typing import Any

from django import template

from chatapp.conversations.models import Conversation
from chatapp.views.answer_settings import header_context

register = template.Library()


@register.inclusion_tag("chatapp/_answer_settings.html", takes_context=True)
def answer_settings(context: template.Context, conversation: Conversation) -> dict[str, Any]:
    return {**header_context(conversation), "csrf_token": context.get("csrf_token")}
