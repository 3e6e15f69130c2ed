"""A new conversation's title, written by its gateway's title model after the first answer, as a
generation of kind "title" in the ledger; a rename always wins; a failed title keeps the first
line. Against the real emulator over loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.urls import reverse

from chatapp.conversations.models import Conversation
from chatapp.conversations.turns import StartedGeneration
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.gateways.models import Gateway
from chatapp.messaging import socket_messages
from chatapp.streaming import titles, worker
from chatapp.streaming.titles import clean_title
from tests.chatapp.conftest import GroupListener, UpstreamLog, logged_in, start_turn
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def titles_on(chat_settings: Any) -> None:
    chat_settings.CHAT_TITLES = True


QUESTION = "How do otters keep warm in cold rivers?\nAnd a second line."


async def answered(
    user: Any, text: str, model: str = "emulator/echo", pk: int | None = None
) -> StartedGeneration:
    started = await start_turn(user, text, model, pk)
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    return started


async def titled_by(model: str) -> None:
    """Every gateway's titles written by `model` (the tests' gateway is the emulator's Numes,
    configured by URL, so it starts with none: the conversation's own model)."""
    await configs.aconfigs()  # the gateway's row, made on first use
    await Gateway.objects.aupdate(title_model=model)
    configs.forget_configs()


async def title_generations(conversation_pk: int) -> list[Generation]:
    return [
        generation
        async for generation in Generation.objects.filter(
            conversation_id=conversation_pk, kind=Generation.Kind.TITLE
        ).order_by("pk")
    ]


async def settled_title(conversation_pk: int) -> Generation:
    async def settled() -> Generation | None:
        found = await title_generations(conversation_pk)
        if found and found[0].status != Generation.Status.STREAMING and not titles.running_pks():
            return found[0]
        return None

    return await eventually(settled, what="the title generation to end")


async def test_the_first_answer_brings_a_title_written_by_the_title_model(
    alice: Any, upstream: UpstreamLog
) -> None:
    tabs = GroupListener(0)
    tabs.group = socket_messages.user_group_name(alice.pk)  # every tab of the user's
    await tabs.join()
    await titled_by("emulator/title")
    started = await answered(alice, QUESTION)
    assert started.conversation.title == "How do otters keep warm in cold rivers?"  # first line
    conversation = started.conversation

    generation = await settled_title(conversation.pk)
    assert generation.status == Generation.Status.COMPLETED
    assert generation.model == "emulator/title"
    assert generation.user_id == alice.pk
    assert generation.upstream_id, "its generation ID is on record"
    assert generation.completion_tokens
    assert (generation.cost_source, generation.cost_unit) == ("stream", "usd")
    assert generation.cost is not None
    assert generation.cost > 0
    record = await upstream.one(scenario="title")
    assert (record.system, record.max_tokens) == (titles.INSTRUCTION, titles.TITLE_MAX_TOKENS)
    assert record.id == generation.upstream_id
    conversation = await Conversation.objects.aget(pk=conversation.pk)
    assert conversation.title_source == Conversation.TitleSource.MODEL
    assert conversation.title == "Otters keep warm cold rivers"
    # Every tab of the user is told.
    pushed = await tabs.until("title")
    assert pushed == {"t": "title", "c": conversation.pk, "title": conversation.title}

    # Asked once: a follow-up does not title the conversation again.
    await answered(alice, "and in summer?", pk=conversation.pk)
    assert len(await title_generations(conversation.pk)) == 1


async def test_with_no_title_model_the_conversations_own_model_writes_it(alice: Any) -> None:
    started = await answered(alice, QUESTION, "emulator/echo")
    generation = await settled_title(started.conversation.pk)
    assert (generation.model, generation.status) == ("emulator/echo", "completed")


async def test_with_titles_off_none_is_asked(alice: Any, chat_settings: Any) -> None:
    chat_settings.CHAT_TITLES = False
    started = await answered(alice, QUESTION)
    assert not titles._tasks
    assert await title_generations(started.conversation.pk) == []


async def test_a_temporary_chat_is_not_titled(alice: Any) -> None:
    """A temporary chat is listed nowhere: a title would be a billed request nobody reads."""
    started = await start_turn(alice, QUESTION, "emulator/echo")
    await Conversation.objects.filter(pk=started.conversation.pk).aupdate(temporary=True)
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    await asyncio.gather(*titles._tasks)
    assert await title_generations(started.conversation.pk) == []


async def test_a_rename_wins_over_the_title_model(alice: Any) -> None:
    started = await start_turn(alice, QUESTION, "emulator/echo")
    await Conversation.objects.filter(pk=started.conversation.pk).aupdate(
        title="My otters", title_source=Conversation.TitleSource.USER
    )
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    await asyncio.gather(*titles._tasks)
    assert await title_generations(started.conversation.pk) == []
    conversation = await Conversation.objects.aget(pk=started.conversation.pk)
    assert (conversation.title, conversation.title_source) == ("My otters", "user")


async def test_a_rename_through_the_page_is_kept_from_the_title_model(alice: Any) -> None:
    await titled_by("emulator/title")
    started = await start_turn(alice, QUESTION, "emulator/long?long_tokens=400")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("delta")  # renamed while the first answer is written
    client = await logged_in(alice)
    await client.post(reverse("chat:rename", args=[started.conversation.pk]), {"title": "Mine"})
    await listener.until("done")
    await asyncio.wait_for(task, 30)
    await asyncio.gather(*titles._tasks)
    assert await title_generations(started.conversation.pk) == []
    conversation = await Conversation.objects.aget(pk=started.conversation.pk)
    assert (conversation.title, conversation.title_source) == ("Mine", "user")


async def test_a_title_model_that_fails_leaves_the_first_line_and_a_failed_generation(
    alice: Any,
) -> None:
    await titled_by("emulator/error-before")
    started = await answered(alice, QUESTION)
    generation = await settled_title(started.conversation.pk)
    assert generation.status == Generation.Status.FAILED
    assert generation.error_status == 402
    conversation = await Conversation.objects.aget(pk=started.conversation.pk)
    assert conversation.title == "How do otters keep warm in cold rivers?"
    assert conversation.title_source == Conversation.TitleSource.FIRST_LINE


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ("Otters in winter", "Otters in winter"),
        ('"Otters in winter."', "Otters in winter"),
        ("# **Otters** in winter\n\nA longer note", "Otters** in winter"),
        ("Title: “Otters”", "Otters"),
        ("  \n\n", ""),
        ("x" * 200, "x" * 79 + "…"),
    ],
)
def test_a_reply_is_cleaned_into_one_short_line(reply: str, title: str) -> None:
    assert clean_title(reply) == title


async def test_a_title_waits_while_a_crowd_of_answers_streams(
    alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answers come first: with more than `CROWD` answers streaming in the process, a finished
    answer's title is not asked for until the crowd has thinned."""
    monkeypatch.setattr(titles, "CROWD", 0)
    await titled_by("emulator/title")
    crowd = await start_turn(alice, "Count slowly", "emulator/long?tokens_per_second=5")
    crowd_task = worker.start(crowd.job)  # streams while the other answer ends
    started = await answered(alice, QUESTION)
    # Unheld, the title would be asked and settled within this second (emulator/title).
    done, waiting = await asyncio.wait(list(titles._tasks), timeout=1.0)
    assert not done
    assert waiting, "the title is waiting"
    assert await title_generations(started.conversation.pk) == []
    worker._running[crowd.job.generation_pk].cancel()
    await asyncio.wait_for(crowd_task, 30)
    generation = await settled_title(started.conversation.pk)
    assert generation.status == Generation.Status.COMPLETED
