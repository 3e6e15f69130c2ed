"""Shared links' rules: who may make one, the token kept only as a digest, the branch fixed when
shared, and what stops a link opening."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.http import Http404

from chatapp.conversations import shared_links
from chatapp.conversations.models import Conversation, Message, SharedLink
from chatapp.costs.models import Generation

pytestmark = pytest.mark.django_db


def turn(
    conversation: Conversation, question: str, answer: str, after: Message | None = None
) -> Message:
    """A finished turn after `after`, shown: its answer is the conversation's leaf."""
    asked = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, parent=after, content=question
    )
    answered = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, parent=asked, content=answer
    )
    Generation.objects.create(
        message=answered, conversation=conversation, model="m", status=Generation.Status.COMPLETED
    )
    conversation.current_leaf = answered
    conversation.save()
    return answered


def texts(link: SharedLink) -> list[str]:
    return [item.message.content for item in shared_links.shown(link)]


def test_a_token_is_256_random_bits_and_only_its_digest_is_kept(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Trip")
    turn(conversation, "Where to?", "Lisbon.")
    made = [shared_links.create(alice, conversation.pk, None) for _ in range(3)]
    tokens = {new.token for new in made}
    assert len(tokens) == 3
    for new in made:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", new.token)  # 32 bytes of URL-safe base64
        row = SharedLink.objects.filter(pk=new.link.pk).values().get()
        assert new.token not in [str(value) for value in row.values()]
        assert row["token_digest"] == shared_links.digest(new.token)
        assert shared_links.live(new.token) == new.link


def test_a_link_shares_the_branch_shown_up_to_its_end_and_nothing_written_later(
    alice: Any,
) -> None:
    conversation = Conversation.objects.create(user=alice, title="Trip")
    first = turn(conversation, "Where to?", "Lisbon.")
    second = turn(conversation, "When?", "In May.", after=first)
    link = shared_links.create(alice, conversation.pk, None).link
    assert link.leaf == second
    # A follow-up, another version of the last answer and an edited question come later.
    turn(conversation, "Budget?", "Modest.", after=second)
    turn(conversation, "When?", "In June.", after=first)
    conversation.title = "Renamed since"
    conversation.save()
    assert texts(link) == ["Where to?", "Lisbon.", "When?", "In May."]
    assert SharedLink.objects.get(pk=link.pk).title == "Trip"  # as it was when shared


def test_the_page_says_where_the_branch_ends(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    first = turn(conversation, "Where to?", "Lisbon.")
    turn(conversation, "When?", "In May.", after=first)
    link = shared_links.create(alice, conversation.pk, first.pk).link
    assert texts(link) == ["Where to?", "Lisbon."]


def test_only_the_owner_makes_a_link_to_their_conversation_or_message(alice: Any, bob: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    answer = turn(conversation, "secret", "kept")
    with pytest.raises(Http404):
        shared_links.create(bob, conversation.pk, None)
    own = Conversation.objects.create(user=bob)
    turn(own, "mine", "yes")
    with pytest.raises(Http404):  # bob's conversation, alice's message
        shared_links.create(bob, own.pk, answer.pk)
    with pytest.raises(Http404):
        shared_links.create(alice, Conversation.objects.create(user=alice).pk, None)
    assert not SharedLink.objects.exists()


def test_revoked_deleted_or_closed_links_open_nothing(alice: Any, bob: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    turn(conversation, "q", "a")
    revoked, deleted, closed = (shared_links.create(alice, conversation.pk, None) for _ in "abc")
    assert shared_links.live(revoked.token) is not None
    with pytest.raises(Http404):  # only the owner revokes
        shared_links.revoke(bob, revoked.link.pk)
    assert shared_links.live(revoked.token) is not None
    shared_links.revoke(alice, revoked.link.pk)
    assert shared_links.live(revoked.token) is None
    when = SharedLink.objects.get(pk=revoked.link.pk).revoked_at
    shared_links.revoke(alice, revoked.link.pk)  # again: nothing changes
    assert SharedLink.objects.get(pk=revoked.link.pk).revoked_at == when

    alice.is_active = False
    alice.save()
    assert shared_links.live(closed.token) is None
    alice.is_active = True
    alice.save()
    assert shared_links.live(closed.token) is not None

    conversation.delete()
    assert shared_links.live(deleted.token) is None
    assert not SharedLink.objects.exists()


def test_a_link_whose_message_is_removed_is_removed(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    answer = turn(conversation, "q", "a")
    new = shared_links.create(alice, conversation.pk, None)
    Message.objects.filter(pk=answer.parent_id).delete()  # the question, and its answer below
    assert shared_links.live(new.token) is None
    assert not SharedLink.objects.exists()


@pytest.mark.parametrize(
    "token",
    ["", "x", "A" * 42, "A" * 44, "A" * 42 + "=", "A" * 42 + "/", "\uff21" * 43],  # fullwidth A
)
def test_a_token_of_another_shape_opens_nothing(token: str, alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    answer = turn(conversation, "q", "a")
    for key in (token, "A" * 43):  # the control, of the shape made
        SharedLink.objects.create(
            conversation=conversation, leaf=answer, token_digest=shared_links.digest(key)
        )
    assert shared_links.live(token) is None
    assert shared_links.live("A" * 43) is not None


def test_the_owner_lists_their_links_with_the_length_of_each_branch(alice: Any, bob: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Trip")
    first = turn(conversation, "q1", "a1")
    short = shared_links.create(alice, conversation.pk, None).link
    turn(conversation, "q2", "a2", after=first)
    long = shared_links.create(alice, conversation.pk, None).link
    theirs = Conversation.objects.create(user=bob)
    turn(theirs, "q", "a")
    shared_links.create(bob, theirs.pk, None)
    listed = shared_links.links_of(alice)
    assert [(item.link, item.messages) for item in listed] == [(long, 4), (short, 2)]


def test_a_private_tools_result_is_kept_back_and_every_answer_after_it(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    timed = turn(conversation, "Time?", "Noon.")
    clock = {"name": "current_time", "status": "done", "result": "12:00"}
    Message.objects.filter(pk=timed.pk).update(tool_calls=[clock])
    searched = turn(conversation, "What did I say?", "Let me look.", after=timed)
    search = {"name": "search_conversations", "status": "done", "result": '{"results": []}'}
    Message.objects.filter(pk=searched.pk).update(tool_calls=[search, clock])
    turn(conversation, "Again?", "As found.", after=searched)
    link = shared_links.create(alice, conversation.pk, None).link
    shown = shared_links.shown(link)
    assert [item.withheld for item in shown] == [False, False, False, False, False, True]
    assert [item.results_kept_back for item in shown] == [False, False, False, True, False, False]
    assert shown[1].tool_calls == [clock]  # another tool's result is shown
    assert shown[3].tool_calls == [{**search, "result": ""}, clock]
    assert shown[5].tool_calls == []
    assert shared_links.shown_at(link, 6) == shown[5]
    assert shared_links.shown_at(link, 7) is None
    assert shared_links.shown_at(link, 0) is None
