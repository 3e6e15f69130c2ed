"""Comparing models: one question, sibling answers started together, the branch shown while none
is chosen, choosing one, and what a follow-up goes on from."""

from __future__ import annotations

from typing import Any

import pytest
from django.http import Http404

from chatapp.access.rate_limits import RateLimited
from chatapp.conversations.comparison import TOO_MANY, choose_answer, create_comparison
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.tree import Versions, shown_path
from chatapp.conversations.turns import BUSY, Answerer, NewerMessages, TurnError, create_turn
from chatapp.costs.models import Generation
from tests.chatapp.conftest import asked

pytestmark = [pytest.mark.django_db]

OWNER = "owner-channel!1"
MODELS = ["emulator/chat", "emulator/echo", "emulator/long"]


def answerers(*models: str) -> list[Answerer]:
    return [Answerer(model=model) for model in models]


def compared(
    user: Any, *models: str, conversation_pk: int | None = None, after: int | None = None
) -> list[Any]:
    return create_comparison(
        user, conversation_pk, "Which is better?", answerers(*models), OWNER, after=after
    )


def end(started: Any, status: str = "completed") -> None:
    Generation.objects.filter(pk=started.generation.pk).update(status=status)
    Message.objects.filter(pk=started.assistant.pk).update(content=f"by {started.job.model}")


def test_one_question_gets_a_sibling_answer_per_model_each_its_own_generation(alice: Any) -> None:
    started = compared(alice, *MODELS)
    question = started[0].user_message
    assert [s.user_message for s in started] == [question] * 3
    answers = [s.assistant for s in started]
    assert [a.parent_id for a in answers] == [question.pk] * 3
    generations = Generation.objects.filter(message__in=answers).order_by("pk")
    assert [g.model for g in generations] == MODELS
    assert {g.status for g in generations} == {"streaming"}
    assert len({s.job.generation_pk for s in started}) == 3
    assert [s.job.messages for s in started] == [
        [{"role": "user", "content": "Which is better?"}]
    ] * 3
    assert {s.job.tools for s in started} == {()}
    conversation = Conversation.objects.get()
    assert conversation.comparing_id == question.pk
    assert conversation.current_leaf_id == answers[0].pk


def test_the_branch_shown_ends_in_the_answers_side_by_side_without_versions(alice: Any) -> None:
    started = compared(alice, "emulator/chat", "emulator/echo")
    path = shown_path(Conversation.objects.get())
    assert [item.message.pk for item in path] == [
        started[0].user_message.pk,
        started[0].assistant.pk,
    ]
    assert [m.pk for m in path[-1].compared] == [s.assistant.pk for s in started]
    assert path[-1].versions is None


@pytest.mark.parametrize("models", [["emulator/chat"], [*MODELS, "emulator/chat"]])
def test_one_model_or_more_than_three_are_refused(alice: Any, models: list[str]) -> None:
    with pytest.raises(TurnError) as caught:
        compared(alice, *models)
    assert str(caught.value) == TOO_MANY
    assert not Conversation.objects.exists()


def test_each_answer_counts_in_the_answers_started_per_minute(alice: Any, settings: Any) -> None:
    settings.CHAT_GENERATIONS_PER_MINUTE = 3
    create_turn(alice, asked("first", "emulator/chat"), OWNER)
    Generation.objects.update(status="completed")
    with pytest.raises(RateLimited) as caught:
        compared(alice, *MODELS)
    assert str(caught.value).startswith("3 answers more would pass the 3 a minute allowed;")
    assert Message.objects.count() == 2, "nothing of the comparison was written"
    assert len(compared(alice, "emulator/chat", "emulator/echo")) == 2


def test_choosing_an_answer_makes_it_the_leaf_and_the_others_its_versions(alice: Any) -> None:
    started = compared(alice, *MODELS)
    for each in started[:2]:
        end(each)
    chosen = choose_answer(alice, started[1].assistant.pk)
    assert chosen.question_pk == started[0].user_message.pk
    assert chosen.leaf_pk == started[1].assistant.pk
    assert chosen.still_running == [(started[2].generation.pk, OWNER)]
    conversation = Conversation.objects.get()
    assert conversation.comparing is None
    assert conversation.model == "emulator/echo", "a follow-up goes to the model chosen"
    assert conversation.gateway_id == started[1].generation.gateway_id
    path = shown_path(conversation)
    assert path[-1].message.pk == started[1].assistant.pk
    assert path[-1].compared == ()
    assert path[-1].versions == Versions(2, 3, started[0].assistant.pk, started[2].assistant.pk)


def test_an_answer_in_no_comparison_cannot_be_chosen(alice: Any, bob: Any) -> None:
    started = compared(alice, "emulator/chat", "emulator/echo")
    with pytest.raises(Http404):
        choose_answer(bob, started[0].assistant.pk)  # another user's
    choose_answer(alice, started[0].assistant.pk)
    with pytest.raises(Http404):
        choose_answer(alice, started[1].assistant.pk)  # chosen from already


def test_a_follow_up_waits_for_every_answer_of_the_comparison(alice: Any) -> None:
    started = compared(alice, "emulator/chat", "emulator/echo")
    end(started[0])
    question = started[0].user_message
    with pytest.raises(TurnError) as caught:
        create_turn(
            alice,
            asked("next", "emulator/chat", question.conversation_id, after=question.pk),
            OWNER,
        )
    assert str(caught.value) == BUSY


@pytest.mark.parametrize(
    ("statuses", "continued_from"),
    [
        (["completed", "completed"], 0),
        (["cancelled", "completed"], 1),  # the first that completed
        (["failed", "cancelled"], 0),  # none did: the first
    ],
)
def test_a_follow_up_sent_without_choosing_goes_on_from_the_default(
    alice: Any, statuses: list[str], continued_from: int
) -> None:
    started = compared(alice, "emulator/chat", "emulator/echo")
    for each, status in zip(started, statuses, strict=True):
        end(each, status)
    question = started[0].user_message
    turn = create_turn(
        alice, asked("next", "emulator/chat", question.conversation_id, after=question.pk), OWNER
    )
    default = started[continued_from]
    assert turn.user_message.parent_id == default.assistant.pk
    assert turn.job.messages[-2:] == [
        {"role": "assistant", "content": f"by {default.job.model}"},
        {"role": "user", "content": "next"},
    ]
    conversation = Conversation.objects.get()
    assert conversation.comparing is None
    versions = shown_path(conversation)[-3].versions
    assert versions is not None
    assert (versions.position, versions.count) == (continued_from + 1, 2)


def test_a_follow_up_to_a_comparison_chosen_from_in_another_tab_is_caught_up(alice: Any) -> None:
    started = compared(alice, "emulator/chat", "emulator/echo")
    for each in started:
        end(each)
    choose_answer(alice, started[1].assistant.pk)
    other_tab = create_turn(
        alice, asked("from the other tab", "emulator/chat", started[0].conversation.pk), OWNER
    )
    end(other_tab)
    question = started[0].user_message
    with pytest.raises(NewerMessages) as caught:
        create_turn(
            alice,
            asked("late", "emulator/chat", question.conversation_id, after=question.pk),
            OWNER,
        )
    assert caught.value.leaf_pk == other_tab.assistant.pk


def test_a_comparison_can_follow_on_from_an_answer(alice: Any) -> None:
    first = create_turn(alice, asked("hello", "emulator/chat"), OWNER)
    end(first)
    started = compared(
        alice,
        "emulator/chat",
        "emulator/echo",
        conversation_pk=first.conversation.pk,
        after=first.assistant.pk,
    )
    assert started[0].user_message.parent_id == first.assistant.pk
    assert started[1].job.messages == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "by emulator/chat"},
        {"role": "user", "content": "Which is better?"},
    ]
