"""Stored answer renders: a render is used only for the message it was made for."""

from __future__ import annotations

from typing import Any

import pytest

from chatapp.conversations.models import Conversation, Message
from chatapp.rendering import answer_html as answer_render
from chatapp.rendering import pool
from chatapp.rendering.markdown import doc_id_for
from chatapp.templatetags.chat import answer_html
from tests.waiting import poll

FOOTNOTED = "Hi[^1]\n\n[^1]: a note"


@pytest.mark.django_db(transaction=True)
def test_two_answers_of_the_same_text_each_render_with_their_own_footnote_ids(
    alice: Any, bob: Any, settings: Any
) -> None:
    pool.shutdown()  # the first render waits for a process: it is under way a while
    first = Message.objects.create(
        conversation=Conversation.objects.create(user=alice, title="t"),
        role="assistant",
        content=FOOTNOTED,
    )
    second = Message.objects.create(
        conversation=Conversation.objects.create(user=bob, title="t"),
        role="assistant",
        content=FOOTNOTED,
    )
    settings.CHAT_RENDER_PAGE_WAIT = 0.0
    answer_html(first)  # pending: its render goes on, and is stored, in the background
    settings.CHAT_RENDER_PAGE_WAIT = 60.0
    shown = answer_html(second)
    assert f'id="fn-{doc_id_for(second.pk)}-1"' in shown
    assert doc_id_for(first.pk) not in shown

    def stored() -> bool:
        first.refresh_from_db()
        return bool(first.html)

    poll(stored, what="the first render to be kept", within=60)
    assert f'id="fn-{doc_id_for(first.pk)}-1"' in first.html
    second.refresh_from_db()
    assert doc_id_for(first.pk) not in second.html


def test_a_render_is_kept_only_for_the_message_it_was_made_for() -> None:
    rendered = answer_render.render_answer_sync(FOOTNOTED, [], doc_id_for(1))
    other = Message(pk=2, content=FOOTNOTED, annotations=[])
    answer_render.keep(other, rendered)
    assert (other.html, other.html_key) == ("", "")
    mine = Message(pk=1, content=FOOTNOTED, annotations=[])
    answer_render.keep(mine, rendered)
    assert mine.html == rendered.html
