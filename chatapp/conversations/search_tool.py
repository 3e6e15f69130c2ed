"""The `search_conversations` tool: finds what the user discussed in their other conversations.

The sidebar's search (`chatapp/conversations/search.py`), so the model finds what the user would,
ranked the same way, and only ever among `context.user_pk`'s conversations. The conversation being
answered is left out: the model already has it. Titles and snippets reach the model as plain text
(the sidebar's are escaped HTML with `<mark>`).

It stands here, beside the search it runs, above `tools`: the app adds it to the built-in tools as
it starts (`tools.add_built_in`, in `apps.ChatappConfig.ready`).
"""

from __future__ import annotations

import html
from typing import Any

import orjson
from django.contrib.auth.models import User

from chatapp.conversations import search
from chatapp.conversations.search import Hit
from chatapp.tools.base import ToolContext, ToolFailure

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "TOOL", "ConversationSearch"]

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


def _plain(marked: str) -> str:
    return html.unescape(marked.replace("<mark>", "").replace("</mark>", ""))


def _found(hit: Hit) -> dict[str, Any]:
    return {
        "conversation_id": hit.pk,
        "title": _plain(hit.title),
        "updated": hit.updated_at.date().isoformat(),
        "snippet": _plain(hit.snippet),
    }


class ConversationSearch:
    name = "search_conversations"
    title = "Search my conversations"
    about = "Finds what you discussed in your other conversations."
    private = True
    description = (
        "Searches the user's other conversations with you (titles and messages) and returns the "
        "best matches: title, date, a snippet and the conversation id. Words match in any order; "
        '"quoted phrases" match exactly and -word excludes.'
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "The words to look for.",
                "minLength": 1,
                "maxLength": search.MAX_QUERY,
            },
            "limit": {
                "type": "integer",
                "description": f"How many conversations at most (default {DEFAULT_LIMIT}).",
                "minimum": 1,
                "maximum": MAX_LIMIT,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        query = str(arguments["query"])
        limit = int(arguments.get("limit", DEFAULT_LIMIT))
        user = User.objects.filter(pk=context.user_pk).first()
        if user is None:
            raise ToolFailure("There is no user to search the conversations of.")
        hits = [
            hit
            for hit in search.search(user, query, limit + 1)
            if hit.pk != context.conversation_pk
        ][:limit]
        found: dict[str, Any] = {"query": query, "results": [_found(hit) for hit in hits]}
        if not hits:
            found["note"] = "No other conversation matches; try fewer or other words."
        return orjson.dumps(found).decode()


TOOL = ConversationSearch()
