"""Starting a turn: input checks in the user's words, titles, ownership, the context sent, and
the branches that regenerating, editing and switching versions make."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.http import Http404
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.tree import Versions, context_for, shown_path
from chatapp.conversations.turns import (
    BUSY,
    MAX_MESSAGE_CHARS,
    TITLE_LENGTH,
    Answerer,
    NewerMessages,
    TurnError,
    create_continuation,
    create_edit,
    create_retry,
    create_turn,
    select_version,
    title_from,
)
from chatapp.costs.models import Generation
from chatapp.costs.token_budgets import larger_budget
from tests.chatapp.conftest import asked

pytestmark = [pytest.mark.django_db]

OWNER = "owner-channel!1"
LATEST = object()  # `said`'s default parent: the conversation's newest message


def said(
    conversation: Conversation, role: str, content: str = "", parent: Any = LATEST, **fields: Any
) -> Message:
    """A message after `parent` (by default the newest message: a conversation read in order)."""
    if parent is LATEST:
        parent = conversation.messages.order_by("pk").last()
    return Message.objects.create(
        conversation=conversation, role=role, content=content, parent=parent, **fields
    )


def answered(
    conversation: Conversation,
    content: str,
    status: str = "completed",
    parent: Any = LATEST,
    **fields: Any,
) -> Message:
    """An assistant message with its generation in `status`."""
    message = said(conversation, "assistant", content, parent, **fields)
    Generation.objects.create(
        message=message, conversation=conversation, model="emulator/chat", status=status
    )
    return message


def context_before_new_answer(conversation: Conversation) -> list[dict[str, Any]]:
    placeholder = said(conversation, "assistant")
    return context_for(conversation, placeholder)


def finish(started: Any, status: str = "completed") -> None:
    """End `turn`'s generation as its worker would, its answer saying "re: <question>"."""
    Generation.objects.filter(pk=started.generation.pk).update(status=status)
    question = Message.objects.get(pk=started.assistant.parent_id)
    Message.objects.filter(pk=started.assistant.pk).update(content=f"re: {question.content}")


def texts(conversation: Conversation) -> list[str]:
    """The branch shown, as each message's text."""
    conversation.refresh_from_db()
    return [item.message.content for item in shown_path(conversation)]


# --- Input checks -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t \n"])
def test_an_empty_message_is_refused(alice: Any, text: str) -> None:
    with pytest.raises(TurnError) as caught:
        create_turn(alice, asked(text, "emulator/chat"), OWNER)
    assert str(caught.value) == "Write a message first."
    assert not Conversation.objects.exists()


def test_a_message_over_the_limit_is_refused(alice: Any) -> None:
    with pytest.raises(TurnError) as caught:
        create_turn(alice, asked("x" * (MAX_MESSAGE_CHARS + 1), "emulator/chat"), OWNER)
    assert str(caught.value) == "The message is too long (at most 100,000 characters)."
    assert not Message.objects.exists()


def test_a_message_at_the_limit_is_accepted_and_stripped_first(alice: Any) -> None:
    text = "x" * MAX_MESSAGE_CHARS
    started = create_turn(alice, asked(f"  {text}\n\n", "emulator/chat"), OWNER)
    assert started.user_message is not None
    assert started.user_message.content == text


def test_no_model_is_refused(alice: Any) -> None:
    with pytest.raises(TurnError) as caught:
        create_turn(alice, asked("hello", ""), OWNER)
    assert str(caught.value) == "Choose a model first."
    assert not Conversation.objects.exists()


def test_a_retry_while_the_answer_is_running_is_refused(alice: Any) -> None:
    started = create_turn(alice, asked("hello", "emulator/chat"), OWNER)
    assert started.generation.status == "streaming"
    with pytest.raises(TurnError) as caught:
        create_retry(alice, started.assistant.pk, OWNER)
    assert str(caught.value) == "This answer is still being written."
    assert Generation.objects.count() == 1


# --- Titles -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Plan a trip to Lisbon\nwith kids", "Plan a trip to Lisbon"),
        ("\n\n   \n  Indented first line  \nsecond", "Indented first line"),
        ("a" * 60, "a" * 60),
        ("a" * 61, "a" * 59 + "…"),
        ("x" * 58 + " " + "y" * 10, "x" * 58 + "…"),  # no space left before the ellipsis
        ("   ", ""),
        # The header shows it before a model's title arrives: no raw markdown.
        (
            "## Plan **fast**: `cart.py` and [the list](https://x.example)",
            "Plan fast: cart.py and the list",
        ),
        ("> - [x] *done* ~~not~~ __now__", "done not now"),
        ("```python\nprint(1)\n```", "print(1)"),
        ("1. 2 * 3 = 6 and snake_case_name", "2 * 3 = 6 and snake_case_name"),
        ("#hashtag and C# stay", "#hashtag and C# stay"),
    ],
)
def test_title_from(text: str, title: str) -> None:
    assert title_from(text) == title


@pytest.mark.timeout(10)
@pytest.mark.parametrize("line", ["_a " * 33_000, "[a" * 50_000], ids=["emphasis", "link"])
def test_a_long_line_of_marks_titles_at_once(line: str) -> None:
    # Unbounded, the emphasis and link patterns took 30 s and 11 s on 60,000 characters of these.
    title = title_from(line)
    assert len(title) == TITLE_LENGTH
    assert title.endswith("…")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "line",
    ["[" * 100_000, "![" * 50_000, " *a" * 33_333, "**a" * 33_333, "> " * 50_000, "[x](" * 25_000],
    ids=["brackets", "images", "emphasis", "strong", "quotes", "links"],
)
def test_a_title_from_a_line_at_the_size_cap_costs_what_a_short_one_does(line: str) -> None:
    """#45, found from outside: a new chat's first line of 30,000 "[" held every page of the
    server for 16 s (its marks stripped in time quadratic in the line); at the message cap,
    minutes. Read from the line's start, and with bounded patterns, it takes milliseconds."""
    title = title_from(line)
    assert len(title) <= 60


def test_the_first_message_titles_a_new_conversation(alice: Any) -> None:
    started = create_turn(alice, asked("Otters\nand rivers", "emulator/chat"), OWNER)
    conversation = Conversation.objects.get(pk=started.conversation.pk)
    assert conversation.user == alice
    assert conversation.title == "Otters"
    assert conversation.model == "emulator/chat"


def test_a_later_message_titles_only_an_untitled_conversation(alice: Any) -> None:
    titled = Conversation.objects.create(user=alice, title="Kept")
    untitled = Conversation.objects.create(user=alice)
    create_turn(alice, asked("Something else", "emulator/chat", titled.pk), OWNER)
    create_turn(alice, asked("Now titled\nbody", "emulator/chat", untitled.pk), OWNER)
    assert Conversation.objects.get(pk=titled.pk).title == "Kept"
    assert Conversation.objects.get(pk=untitled.pk).title == "Now titled"


# --- The turn and its job -----------------------------------------------------------------------


def test_a_turn_is_a_question_a_placeholder_and_a_streaming_generation(alice: Any) -> None:
    started = create_turn(alice, asked("  hello  ", "emulator/echo"), OWNER)
    question, answer = Message.objects.filter(conversation=started.conversation)
    assert (question.role, question.content) == ("user", "hello")
    assert (answer.role, answer.content) == ("assistant", "")
    generation = Generation.objects.get(message=answer)
    assert generation.status == "streaming"
    assert generation.model == "emulator/echo"
    assert generation.owner_channel == OWNER
    assert started.user_message == question
    assert started.assistant == answer
    assert started.generation == generation
    job = started.job
    assert job.generation_pk == generation.pk  # our key, not the gateway's generation ID
    assert job.message_pk == answer.pk
    assert job.conversation_pk == started.conversation.pk
    assert job.model == "emulator/echo"
    assert job.owner_channel == OWNER
    assert job.messages == [{"role": "user", "content": "hello"}]


def test_a_retry_is_a_new_generation_with_the_failed_ones_model_by_default(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="t")
    question = said(conversation, "user", "hello")
    failed = answered(conversation, "", status="failed")
    started = create_retry(alice, failed.pk, OWNER)
    assert started.user_message is None
    assert started.generation.model == "emulator/chat"
    assert started.assistant.pk > failed.pk
    assert started.assistant.parent == question  # a sibling of the failed answer
    # The failed attempt is not context for its retry.
    assert started.job.messages == [{"role": "user", "content": "hello"}]
    finish(started)
    other = create_retry(alice, failed.pk, OWNER, Answerer(model="emulator/echo"))
    assert other.generation.model == "emulator/echo"
    assert Conversation.objects.get(pk=conversation.pk).model == "emulator/echo"


def thought_until_the_budget_ran_out(conversation: Conversation, **fields: Any) -> Message:
    """An answer whose budget ran out while it thought (`fields`: its generation's)."""
    message = said(conversation, "assistant", reasoning="Let me think")
    Generation.objects.create(
        message=message,
        conversation=conversation,
        model="emulator/length",
        status="completed",
        finish_reason="length",
        **fields,
    )
    return message


@pytest.mark.parametrize(
    ("fields", "budget"),
    [
        ({}, 4096),  # nothing known: Osmexo's safe default for a reasoning model
        ({"completion_tokens": 48}, 4096),  # the gateway's default budget, at least 4,096
        ({"completion_tokens": 3000}, 6000),
        ({"max_tokens": 4096, "completion_tokens": 4000}, 8192),  # the budget asked, doubled
        ({"max_tokens": 20_000}, 32_768),  # at most
        ({"max_tokens": 32_768}, None),
        ({"completion_tokens": 40_000}, None),  # the gateway's default was already larger
    ],
)
def test_larger_budget(fields: dict[str, Any], budget: int | None) -> None:
    assert larger_budget(Generation(model="m", **fields)) == budget


def test_a_continuation_is_a_retry_with_a_larger_budget(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="t")
    said(conversation, "user", "hello")
    cut = thought_until_the_budget_ran_out(conversation, completion_tokens=48)
    started = create_continuation(alice, cut.pk, OWNER)
    assert started.user_message is None
    assert started.assistant.pk > cut.pk
    assert started.generation.model == "emulator/length"
    assert started.generation.max_tokens == 4096
    assert Generation.objects.get(pk=started.generation.pk).max_tokens == 4096
    assert started.job.max_tokens == 4096
    assert started.job.model == "emulator/length"
    assert started.job.messages == [{"role": "user", "content": "hello"}]
    # Its own budget ran out too: twice that, next.
    Generation.objects.filter(pk=started.generation.pk).update(
        status="completed", finish_reason="length", completion_tokens=4096
    )
    again = create_continuation(alice, started.assistant.pk, OWNER)
    assert again.job.max_tokens == again.generation.max_tokens == 8192


def test_a_retry_asks_for_the_gateways_budget(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="t")
    said(conversation, "user", "hello")
    failed = answered(conversation, "", status="failed")
    started = create_retry(alice, failed.pk, OWNER)
    assert started.generation.max_tokens is None
    assert started.job.max_tokens is None


def test_only_an_answer_that_ran_out_of_budget_is_continued(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="t")
    said(conversation, "user", "hello")
    done = answered(conversation, "the whole answer")
    most = thought_until_the_budget_ran_out(conversation, max_tokens=32_768)
    for message in (done, most):
        with pytest.raises(TurnError) as caught:
            create_continuation(alice, message.pk, OWNER)
        assert str(caught.value) == (
            "Only an answer that ran out of its token budget gets a larger one."
        )
    running = create_turn(alice, asked("more", "emulator/length", conversation.pk), OWNER)
    with pytest.raises(TurnError, match=r"^This answer is still being written\.$"):
        create_continuation(alice, running.assistant.pk, OWNER)
    assert Generation.objects.count() == 3


# --- Context ------------------------------------------------------------------------------------


def test_context_alternates_user_and_assistant(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "one")
    answered(conversation, "first answer")
    said(conversation, "user", "two")
    answered(conversation, "second answer")
    said(conversation, "user", "three")
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "second answer"},
        {"role": "user", "content": "three"},
    ]


def test_reasoning_details_are_sent_back_unchanged(alice: Any) -> None:
    details = [{"type": "reasoning.encrypted", "data": "c2lnbmVk", "id": "r1", "index": 0}]
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "why?")
    answered(conversation, "because", reasoning="thinking", reasoning_details=details)
    said(conversation, "user", "and then?")
    assert context_before_new_answer(conversation)[1] == {
        "role": "assistant",
        "content": "because",
        "reasoning_details": details,
    }


def test_an_answer_with_only_reasoning_details_is_sent(alice: Any) -> None:
    details = [{"type": "reasoning.text", "text": "hm", "signature": "sig"}]
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "q")
    answered(conversation, "", reasoning_details=details)
    said(conversation, "user", "q2")
    assert context_before_new_answer(conversation)[1] == {
        "role": "assistant",
        "content": "",
        "reasoning_details": details,
    }


def test_an_answer_off_the_path_is_not_context(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    question = said(conversation, "user", "q")
    answer = answered(conversation, "the answer")
    answered(conversation, "another version", parent=question)  # a newer sibling, not followed
    said(conversation, "user", "q2", parent=answer)
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "the answer"},
        {"role": "user", "content": "q2"},
    ]


def test_a_retried_answer_replaces_the_attempt_before_it(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    question = said(conversation, "user", "q")
    answered(conversation, "half an answ", status="failed")
    answered(conversation, "the whole answer", parent=question)
    said(conversation, "user", "q2")
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "the whole answer"},
        {"role": "user", "content": "q2"},
    ]


def test_a_turn_without_any_answer_sends_the_questions_alone(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "q")
    answered(conversation, "", status="failed")
    said(conversation, "user", "q2")
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "q"},
        {"role": "user", "content": "q2"},
    ]


def test_tool_calls_that_never_ran_are_not_sent_back(alice: Any) -> None:
    call = {"index": 0, "id": "call_1", "name": "get_weather", "arguments": "{}"}
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "weather?")
    answered(conversation, "", tool_calls=[call])
    said(conversation, "user", "well?")
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "weather?"},
        {"role": "user", "content": "well?"},
    ]


def test_tool_calls_that_ran_go_back_with_their_results(alice: Any) -> None:
    ran = {
        "index": 0,
        "id": "call_1",
        "name": "calculator",
        "arguments": '{"expression": "6*7"}',
        "status": "done",
        "result": "42",
        "duration_ms": 1,
    }
    stopped = {**ran, "index": 1, "id": "call_2", "status": "cancelled", "result": "stopped"}
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "6*7?")
    answered(conversation, "", tool_calls=[ran, stopped])
    said(conversation, "user", "and?")
    function = {"name": "calculator", "arguments": '{"expression": "6*7"}'}
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "6*7?"},
        {
            "role": "assistant",
            "content": None,  # OpenAI's form for calls without text
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": function},
                {"id": "call_2", "type": "function", "function": function},
            ],
        },
        # Every call is answered, a stopped one too, as the API requires.
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "tool", "tool_call_id": "call_2", "content": "stopped"},
        {"role": "user", "content": "and?"},
    ]


def test_messages_from_the_answer_on_are_not_context(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    question = said(conversation, "user", "q")
    earlier = answered(conversation, "an earlier attempt at this answer")
    placeholder = said(conversation, "assistant", parent=question)
    said(conversation, "user", "asked later", parent=earlier)
    assert context_for(conversation, placeholder) == [{"role": "user", "content": "q"}]
    assert context_for(conversation, earlier) == [{"role": "user", "content": "q"}]


# --- Ownership ----------------------------------------------------------------------------------


def test_another_users_conversation_is_not_found(alice: Any, bob: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="private")
    with pytest.raises(Http404, match=r"^No such conversation\.$"):
        create_turn(bob, asked("hello", "emulator/chat", conversation.pk), OWNER)
    with pytest.raises(Http404, match=r"^No such conversation\.$"):
        create_turn(alice, asked("hello", "emulator/chat", conversation.pk + 1), OWNER)
    assert not Message.objects.exists()


def test_another_users_message_cannot_be_retried(alice: Any, bob: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    question = said(conversation, "user", "q")
    failed = answered(conversation, "", status="failed")
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_retry(bob, failed.pk, OWNER)
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_retry(alice, question.pk, OWNER)  # only answers are retried
    assert Generation.objects.count() == 1


def test_another_users_answer_cannot_be_continued(alice: Any, bob: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    said(conversation, "user", "q")
    cut = thought_until_the_budget_ran_out(conversation)
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_continuation(bob, cut.pk, OWNER)
    assert Generation.objects.count() == 1


# --- Branches -----------------------------------------------------------------------------------


def two_turns(user: Any) -> tuple[Conversation, list[Message]]:
    """A conversation "one" → "re: one" → "two" → "re: two", finished: its four messages."""
    first = create_turn(user, asked("one", "emulator/echo"), OWNER)
    finish(first)
    second = create_turn(user, asked("two", "emulator/echo", first.conversation.pk), OWNER)
    finish(second)
    messages = list(Message.objects.filter(conversation=first.conversation).order_by("pk"))
    return Conversation.objects.get(pk=first.conversation.pk), messages


def test_context_is_the_path_of_the_branch_down_to_the_answers_question(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice)
    one = said(conversation, "user", "one")
    first = answered(conversation, "first answer")
    said(conversation, "user", "two")
    answered(conversation, "second answer")
    deux = said(conversation, "user", "deux", parent=first)  # an edit of "two"
    answered(conversation, "", status="failed")  # no text: left out
    answered(conversation, "réponse", parent=deux, reasoning_details=[{"type": "x"}])
    said(conversation, "user", "trois")
    assert context_before_new_answer(conversation) == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "deux"},
        {"role": "assistant", "content": "réponse", "reasoning_details": [{"type": "x"}]},
        {"role": "user", "content": "trois"},
    ]
    # A new version of the first answer sees only what came before it.
    again = said(conversation, "assistant", parent=one)
    assert context_for(conversation, again) == [{"role": "user", "content": "one"}]


def test_a_follow_up_comes_after_the_current_leaf_and_becomes_it(alice: Any) -> None:
    conversation, (_one, _re_one, two, re_two) = two_turns(alice)
    assert conversation.current_leaf == re_two
    finish(create_edit(alice, two.pk, "deux", Answerer(model="emulator/echo"), OWNER))
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=re_two)  # shown again
    started = create_turn(alice, asked("three", "emulator/echo", conversation.pk), OWNER)
    assert started.user_message is not None
    assert started.user_message.parent == re_two
    assert started.assistant.parent == started.user_message
    assert started.job.messages == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "re: one"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "re: two"},
        {"role": "user", "content": "three"},
    ]
    conversation.refresh_from_db()
    assert conversation.current_leaf == started.assistant
    assert texts(conversation) == ["one", "re: one", "two", "re: two", "three", ""]


def test_a_follow_up_without_a_leaf_set_comes_after_the_newest_message(alice: Any) -> None:
    conversation, (_, _, _, re_two) = two_turns(alice)
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=None)
    started = create_turn(alice, asked("three", "emulator/echo", conversation.pk), OWNER)
    assert started.user_message is not None
    assert started.user_message.parent == re_two


def test_a_leaf_with_descendants_is_read_as_its_newest_one(alice: Any) -> None:
    conversation, (one, _, _, re_two) = two_turns(alice)
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=one)
    assert texts(conversation) == ["one", "re: one", "two", "re: two"]
    started = create_turn(alice, asked("three", "emulator/echo", conversation.pk), OWNER)
    assert started.user_message is not None
    assert started.user_message.parent == re_two


def test_a_follow_up_comes_after_the_message_the_page_shows(alice: Any, bob: Any) -> None:
    conversation, (_, _, two, re_two) = two_turns(alice)
    finish(create_edit(alice, two.pk, "deux", Answerer(model="emulator/echo"), OWNER))
    # A page showing the first branch (the leaf is the edit's answer now) goes on from its end.
    started = create_turn(
        alice, asked("trois", "emulator/echo", conversation.pk, after=re_two.pk), OWNER
    )
    assert started.user_message is not None
    assert started.user_message.parent == re_two
    finish(started)
    _others, (_, bobs, *_) = two_turns(bob)
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_turn(alice, asked("x", "emulator/echo", conversation.pk, after=bobs.pk), OWNER)
    assert not Message.objects.filter(content="x").exists()


def test_a_follow_up_to_a_message_gone_on_from_is_refused_with_the_newest_after_it(
    alice: Any,
) -> None:
    conversation, (one, re_one, _, re_two) = two_turns(alice)
    # Another tab went on from "re: one" since this page showed it, then switched to another
    # version of the first question: what went on after "re: one" still stands.
    finish(create_edit(alice, one.pk, "un", Answerer(model="emulator/echo"), OWNER))
    with pytest.raises(NewerMessages) as refused:
        create_turn(alice, asked("x", "emulator/echo", conversation.pk, after=re_one.pk), OWNER)
    assert str(refused.value) == (
        "This conversation has new messages: they are shown now; send again to continue."
    )
    assert refused.value.leaf_pk == re_two.pk
    assert not Message.objects.filter(content="x").exists()
    # An edit and a retry of what came before are new branches, asked for.
    finish(create_retry(alice, re_one.pk, OWNER, Answerer(model="emulator/chat")))
    finish(create_edit(alice, one.pk, "uno", Answerer(model="emulator/echo"), OWNER))
    assert texts(conversation) == ["uno", "re: uno"]


def test_a_follow_up_comes_after_an_answer_never_after_a_question(alice: Any) -> None:
    conversation, (one, *_) = two_turns(alice)
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_turn(alice, asked("x", "emulator/echo", conversation.pk, after=one.pk), OWNER)
    assert not Message.objects.filter(content="x").exists()


def test_regenerating_an_earlier_answer_makes_a_sibling_from_the_context_before_it(
    alice: Any,
) -> None:
    conversation, (one, re_one, _two, _re_two) = two_turns(alice)
    started = create_retry(alice, re_one.pk, OWNER, Answerer(model="emulator/chat"))
    assert started.assistant.parent == one
    assert started.generation.model == "emulator/chat"
    assert started.job.messages == [{"role": "user", "content": "one"}]
    conversation.refresh_from_db()
    assert conversation.current_leaf == started.assistant
    path = shown_path(conversation)
    assert [item.message for item in path] == [one, started.assistant]
    assert path[0].versions is None
    assert path[1].versions == Versions(2, 2, re_one.pk, None)
    # Nothing is deleted, and each attempt keeps its own generation.
    assert Message.objects.filter(conversation=conversation).count() == 5
    assert Generation.objects.filter(conversation=conversation).count() == 3
    assert Generation.objects.get(message=re_one).status == "completed"


def test_an_edit_is_a_sibling_question_answered_from_the_context_before_it(alice: Any) -> None:
    conversation, (one, re_one, two, _re_two) = two_turns(alice)
    choice = Answerer(model="emulator/chat")
    started = create_edit(alice, two.pk, "  deux  ", choice, OWNER)
    question = started.user_message
    assert question is not None
    assert (question.content, question.parent) == ("deux", re_one)
    assert started.assistant.parent == question
    assert started.generation.model == "emulator/chat"
    assert started.job.messages == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "re: one"},
        {"role": "user", "content": "deux"},
    ]
    conversation.refresh_from_db()
    assert conversation.current_leaf == started.assistant
    assert conversation.title == "one"
    path = shown_path(conversation)
    assert [item.message.content for item in path] == ["one", "re: one", "deux", ""]
    assert path[2].versions == Versions(2, 2, two.pk, None)
    assert path[3].versions is None
    finish(started)
    # The first question has no parent: its edit is another root.
    root = create_edit(alice, one.pk, "uno", choice, OWNER)
    assert root.user_message is not None
    assert root.user_message.parent is None
    assert root.job.messages == [{"role": "user", "content": "uno"}]
    conversation.refresh_from_db()
    assert shown_path(conversation)[0].versions == Versions(2, 2, one.pk, None)


def test_an_edit_is_checked_like_a_message_and_only_of_ones_own_question(
    alice: Any, bob: Any
) -> None:
    conversation, (_, re_one, two, _) = two_turns(alice)
    choice = Answerer(model="emulator/echo")
    with pytest.raises(TurnError, match=r"^Write a message first\.$"):
        create_edit(alice, two.pk, "  ", choice, OWNER)
    with pytest.raises(TurnError, match=r"^Choose a model first\.$"):
        create_edit(alice, two.pk, "deux", Answerer(model=""), OWNER)
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_edit(bob, two.pk, "deux", choice, OWNER)
    with pytest.raises(Http404, match=r"^No such message\.$"):
        create_edit(alice, re_one.pk, "deux", choice, OWNER)  # an answer is regenerated instead
    assert Message.objects.filter(conversation=conversation).count() == 4


def test_switching_to_a_version_shows_its_newest_descendants(alice: Any, bob: Any) -> None:
    conversation, (one, _re_one, two, re_two) = two_turns(alice)
    edit = create_edit(alice, two.pk, "deux", Answerer(model="emulator/echo"), OWNER)
    assert edit.user_message is not None
    # Allowed while that answer is written: switching only changes what is shown.
    shown_conversation, leaf = select_version(alice, two.pk)
    assert (shown_conversation, leaf) == (conversation, re_two.pk)
    assert texts(conversation) == ["one", "re: one", "two", "re: two"]
    assert shown_path(conversation)[2].versions == Versions(1, 2, None, edit.user_message.pk)
    select_version(alice, edit.user_message.pk)
    assert texts(conversation) == ["one", "re: one", "deux", ""]
    select_version(alice, one.pk)  # the newest message under it: the edit's answer
    conversation.refresh_from_db()
    assert conversation.current_leaf == edit.assistant
    with pytest.raises(Http404, match=r"^No such message\.$"):
        select_version(bob, two.pk)


def test_an_answer_whose_worker_died_does_not_hold_up_the_next_turn(alice: Any) -> None:
    # Its process crashed: it is still `streaming` until the sweep comes by, but beats no more.
    conversation, _ = two_turns(alice)
    dead = create_turn(alice, asked("three", "emulator/echo", conversation.pk), OWNER)
    silent = timezone.now() - timedelta(seconds=settings.CHAT_STALE_AFTER + 1)
    Generation.objects.filter(pk=dead.generation.pk).update(heartbeat_at=silent)
    started = create_turn(alice, asked("four", "emulator/echo", conversation.pk), OWNER)
    assert started.user_message is not None
    assert Generation.objects.get(pk=dead.generation.pk).status == "streaming"
    # One that beat a moment ago is waited for.
    Generation.objects.filter(pk=started.generation.pk).update(heartbeat_at=timezone.now())
    with pytest.raises(TurnError, match="still being written"):
        create_turn(alice, asked("five", "emulator/echo", conversation.pk), OWNER)


def test_no_second_turn_starts_while_an_answer_is_written(alice: Any) -> None:
    conversation, (_one, re_one, two, _re_two) = two_turns(alice)
    running = create_turn(alice, asked("three", "emulator/echo", conversation.pk), OWNER)
    choice = Answerer(model="emulator/echo")
    Generation.objects.filter(message=re_one).update(finish_reason="length")
    for start in (
        lambda: create_turn(alice, asked("four", "emulator/echo", conversation.pk), OWNER),
        lambda: create_retry(alice, re_one.pk, OWNER),
        lambda: create_edit(alice, two.pk, "deux", choice, OWNER),
        lambda: create_continuation(alice, re_one.pk, OWNER),
    ):
        with pytest.raises(TurnError) as caught:
            start()
        assert str(caught.value) == BUSY
    assert BUSY == (
        "An answer is still being written in this conversation; stop it or wait for it to finish."
    )
    assert Message.objects.filter(conversation=conversation).count() == 6
    # Another conversation is not held up, and once the answer ends the next turn starts.
    create_turn(alice, asked("elsewhere", "emulator/echo"), OWNER)
    finish(running, status="cancelled")
    create_turn(alice, asked("four", "emulator/echo", conversation.pk), OWNER)
