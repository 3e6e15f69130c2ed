"""The app's 404 page (`handler404`): on a conversation's URL, the chat page with the sidebar and a
way to a new chat in place of the conversation; anywhere else, a plain page that says so.

A conversation that was deleted, never existed or is another user's gets the same page, word for
word: whether someone else's exists is not the visitor's to learn. Django calls this handler only
with DEBUG off (with it on, its own page shows why nothing matched).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from chatapp.costs import spend_push
from chatapp.views import library


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    match = request.resolver_match
    user = getattr(request, "user", None)  # not there when the middleware failed
    on_conversation = match is not None and match.view_name == "chat:conversation"
    if not (on_conversation and user is not None and user.is_authenticated):
        return render(request, "404.html", status=404)
    context = {
        "missing": True,
        "sidebar": library.sidebar(user),
        **spend_push.spend_context(user),
        "stall_notice_ms": round(settings.CHAT_STALL_NOTICE * 1000),
    }
    return render(request, "chatapp/chat.html", context, status=404)
