"""Feedback on an answer (`conversations/feedback.py`): the thumbs and comment of its footer.

One endpoint: the answer's owner posts a rating ("up", "down", or "" to take it back) and, from
the comment form, a comment. htmx gets the footer's feedback block back; without htmx, the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from chatapp.conversations import feedback as answer_feedback
from chatapp.conversations.models import Message

if TYPE_CHECKING:
    from chatapp.authenticated import AuthenticatedRequest

SAID = {"up": "Marked as a good answer.", "down": "Marked as a bad answer.", "": "Rating removed."}


@login_required
@require_POST
def feedback(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    message = get_object_or_404(
        Message.objects.select_related("generation"),
        pk=pk,
        conversation__user=request.user,
        role=Message.Role.ASSISTANT,
    )
    if not answer_feedback.can_rate(message):
        return HttpResponseBadRequest("This answer takes no feedback (yet).")
    rating = request.POST.get("rating", "")
    if rating and rating not in answer_feedback.RATINGS:
        return HttpResponseBadRequest("Not a rating.")
    comment = request.POST.get("comment")
    given = answer_feedback.give(request.user, message.generation, rating, comment)
    if not request.htmx:
        url = reverse("chat:conversation", args=[message.conversation_id])
        return HttpResponseRedirect(f"{url}#message-{message.pk}")
    context = {
        "message": message,
        "feedback": given,
        # Asked for once, as a bad answer is marked (a comment already saved closes it).
        "ask_comment": (
            given is not None and given.rating == "down" and comment is None and not given.comment
        ),
        "said": "Comment saved." if comment is not None else SAID[rating],
    }
    return render(request, "chatapp/_feedback.html", context)
