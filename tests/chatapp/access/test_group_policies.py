"""Group policies (`chatapp/access/group_policies.py`): how model and tool patterns match and how
several groups add up; a model a user may not use is not in their picker and is refused on the
server on every path that starts a turn, before anything goes upstream; tools the groups leave
out are neither offered in Settings nor sent to the model."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.urls import reverse

from chatapp import tools
from chatapp.access.group_policies import (
    EVERYTHING,
    Access,
    ModelNotAllowed,
    access_for,
    catalog_for,
    check_model,
    patterns,
)
from chatapp.access.models import GroupPolicy
from chatapp.assistants.models import Assistant, Prompt
from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.request_options import RequestOptions, upstream_tools
from chatapp.costs.models import Generation
from chatapp.gateways.catalog import catalog
from chatapp.streaming import worker
from tests.chatapp.conftest import UpstreamLog, logged_in, start_turn
from tests.chatapp.ws.test_consumers import connect, receive, socket

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
GATEWAY = "Default gateway"  # the emulator's row (`configs`)


def in_group(user: Any, name: str, models: str = "*", tools: str = "*") -> Group:
    group, _ = Group.objects.get_or_create(name=name)
    GroupPolicy.objects.update_or_create(
        group=group, defaults={"model_patterns": models, "tool_patterns": tools}
    )
    user.groups.add(group)
    return group


async def workers_done() -> None:
    while worker._tasks:
        await asyncio.wait_for(asyncio.wait(list(worker._tasks)), 30)


def refused(response: Any) -> str:
    assert response.get("HX-Retarget") == "#composer-error", "started, not refused"
    return str(response.content.decode().strip())


def picker_models(html: str) -> list[str]:
    """The model IDs the page's picker offers (its values are `g<gateway pk>:<model>`)."""
    select = re.search(r'<select[^>]*name="model".*?</select>', html, re.S)
    assert select is not None
    return re.findall(r'<option value="g\d+:([^"]+)"', select.group(0))


# --- Matching -----------------------------------------------------------------------------------


def test_patterns_are_the_non_blank_lines_stripped() -> None:
    assert patterns(" openai/*\r\n\n  Numes:* \n") == ("openai/*", "Numes:*")
    assert patterns("") == ()


@pytest.mark.parametrize(
    ("pattern", "gateway", "model", "allowed"),
    [
        ("openai/*", "Numes", "openai/gpt-4o", True),
        ("openai/*", "Numes", "anthropic/claude", False),
        ("Numes:*", "Numes", "anthropic/claude", True),
        ("Numes:*", "Other", "anthropic/claude", False),
        ("Numes:openai/*", "Numes", "openai/gpt-4o", True),
        ("Numes:openai/*", "Other", "openai/gpt-4o", False),
        ("*gpt-4o*", "Numes", "openai/gpt-4o-mini", True),
        ("OPENAI/*", "Numes", "openai/gpt-4o", False),  # case counts
        ("llama3:*", "Ollama", "llama3:8b", True),  # a colon in the model ID
    ],
)
def test_a_model_pattern_matches_the_id_or_gateway_and_id(
    pattern: str, gateway: str, model: str, allowed: bool
) -> None:
    assert Access((pattern,), ("*",)).allows_model(gateway, model) is allowed


def test_several_groups_allow_what_any_of_them_allows(alice: Any) -> None:
    in_group(alice, "Research", models="emulator/chat", tools="calculator")
    in_group(alice, "Support", models="emulator/echo", tools="")
    access = access_for(alice.pk)
    assert access.allows_model(GATEWAY, "emulator/chat")
    assert access.allows_model(GATEWAY, "emulator/echo")
    assert not access.allows_model(GATEWAY, "emulator/reasoning")
    assert access.allows_tool("calculator")
    assert not access.allows_tool("current_time")
    assert access.groups == ("Research", "Support")


def test_no_policy_or_a_superuser_may_use_everything(alice: Any, django_user_model: Any) -> None:
    alice.groups.add(Group.objects.create(name="Plain"))  # a group without a policy
    assert access_for(alice.pk) == EVERYTHING
    root = django_user_model.objects.create_superuser("root", password="x")
    in_group(root, "Research", models="", tools="")
    assert access_for(root.pk) == EVERYTHING
    assert access_for(None) == EVERYTHING


def test_empty_patterns_allow_nothing_and_the_refusal_names_the_groups(alice: Any) -> None:
    in_group(alice, "Interns", models="", tools="")
    with pytest.raises(ModelNotAllowed) as refusal:
        check_model(alice.pk, GATEWAY, "emulator/chat")
    assert str(refusal.value) == (
        "Your group (Interns) may not use 'emulator/chat' on Default gateway: choose another model."
    )
    in_group(alice, "Trainees", models="")
    with pytest.raises(ModelNotAllowed, match=r"Your groups \(Interns and Trainees\) may not"):
        check_model(alice.pk, GATEWAY, "emulator/chat")


# --- The picker and the server ------------------------------------------------------------------


async def test_the_picker_offers_only_the_models_the_groups_allow(alice: Any, bob: Any) -> None:
    await sync_to_async(in_group)(alice, "Research", models="emulator/chat\nemulator/echo")
    html = (await (await logged_in(alice)).get("/")).content.decode()
    assert sorted(picker_models(html)) == ["emulator/chat", "emulator/echo"]
    everything = picker_models((await (await logged_in(bob)).get("/")).content.decode())
    assert len(everything) > 2, "bob is in no group: every model"
    assert "emulator/reasoning" in everything


@pytest.mark.parametrize(
    "models",
    ["emulator/chat\nemulator/echo", f"{GATEWAY}:emulator/t*", "*reason*", "", "*"],
)
async def test_the_picker_and_a_start_of_a_generation_follow_one_rule(
    alice: Any, models: str
) -> None:
    """Every model of the catalog is in the user's picker (`catalog_for`) exactly when a
    generation may start with it (`check_model`, which every start asks: the test below)."""
    await sync_to_async(in_group)(alice, "Research", models=models)
    found = await catalog()
    offered = {
        (gateway.config.name, choice.model)
        for gateway in catalog_for(await sync_to_async(access_for)(alice.pk), found)
        for choice in gateway.choices
    }
    every = {(gateway.config.name, choice.model) for gateway in found for choice in gateway.choices}
    assert every > {(GATEWAY, "emulator/chat")}, "the emulator's catalog"

    def may_start(name: str, model: str) -> bool:
        try:
            check_model(alice.pk, name, model)
        except ModelNotAllowed:
            return False
        return True

    starts = {pair for pair in every if await sync_to_async(may_start)(*pair)}
    assert starts == offered


async def test_the_assistant_form_offers_only_the_models_the_groups_allow(alice: Any) -> None:
    await sync_to_async(in_group)(alice, "Research", models="emulator/chat\nemulator/echo")
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:new_assistant"))).content.decode()
    assert sorted(re.findall(r'<option value="g\d+:([^"]+)"', html)) == [
        "emulator/chat",
        "emulator/echo",
    ]
    gateway = re.search(r'<option value="(g\d+):', html)
    assert gateway is not None
    posted = {"name": "Thinker", "model": f"{gateway.group(1)}:emulator/reasoning"}
    response = await client.post(reverse("chat:new_assistant"), posted)
    assert "Choose a model from the list." in response.content.decode()
    assert not await Assistant.objects.aexists()


async def test_a_send_naming_a_model_not_allowed_is_refused_and_nothing_goes_upstream(
    alice: Any, upstream: UpstreamLog
) -> None:
    await sync_to_async(in_group)(alice, "Research", models="emulator/echo")
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"), {"content": "Otters?", "model": "emulator/chat"}, headers=HTMX
    )
    assert refused(response) == (
        "Your group (Research) may not use &#x27;emulator/chat&#x27; on Default gateway: "
        "choose another model."
    )
    assert upstream.new() == []
    assert await Conversation.objects.acount() == 0


FORBIDDEN = "emulator/reasoning"  # what the review's intern got, billed to the group


async def finished_turn(user: Any, model: str, *tools_on: str) -> list[Generation]:
    """A turn by `model` in a new conversation of `user` with `tools_on`, run to its end: its
    generations, one per round, oldest first."""
    conversation = await Conversation.objects.acreate(user=user, max_tokens=10, tools=tools_on)
    worker.start((await start_turn(user, "What is six times seven?", model, conversation.pk)).job)
    await workers_done()
    rounds = Generation.objects.filter(conversation=conversation).select_related("message")
    return [g async for g in rounds.order_by("pk")]


async def test_every_way_of_starting_a_generation_checks_the_model(
    alice: Any, upstream: UpstreamLog
) -> None:
    """Every route that starts a generation, with a model the user's groups forbid (posted, or
    the answer's own that a retry or continuation keeps): refused in words, nothing started,
    nothing billed. The tool turn's later rounds answer an answer that has a generation: the
    review's bypass (Regenerate on a tool turn's last round) and its twin, Continue."""
    (plain,) = await finished_turn(alice, "emulator/echo")
    first, last = await finished_turn(alice, "emulator/tools", "calculator")
    assert (first.tool_round, last.tool_round) == (1, 2)
    for cut in (plain, last):  # both may be continued, but for the model
        await Generation.objects.filter(pk=cut.pk).aupdate(finish_reason="length")
    question = await Message.objects.aget(pk=plain.message.parent_id)
    tool_question = await Message.objects.aget(pk=first.message.parent_id)
    shared = await Assistant.objects.acreate(name="Thinker", model=FORBIDDEN)
    await Prompt.objects.acreate(name="think", text="Think it through: {{question}}")
    # Since those answers, the intern's group allows only emulator/chat.
    await sync_to_async(in_group)(alice, "Interns", models="emulator/chat")
    before = len(upstream.new())
    generations, conversations = (
        await Generation.objects.acount(),
        await Conversation.objects.acount(),
    )
    client = await logged_in(alice)
    on, tool_on = plain.conversation_id, last.conversation_id
    routes: list[tuple[str, dict[str, Any], str]] = [
        (reverse("chat:send_new"), {"content": "hi"}, FORBIDDEN),
        (
            reverse("chat:send_new"),
            {"content": "hi", "model": "emulator/chat", "compare": FORBIDDEN},
            FORBIDDEN,
        ),
        (reverse("chat:send_new"), {"content": "hi", "assistant": shared.pk}, FORBIDDEN),
        (reverse("chat:send_new"), {"content": "Think it through: why?"}, FORBIDDEN),  # a prompt
        (reverse("chat:send", args=[on]), {"content": "two"}, FORBIDDEN),
        (reverse("chat:send", args=[on]), {"content": "two", "after": plain.message_id}, FORBIDDEN),
        (
            reverse("chat:send", args=[on]),
            {"content": "2", "model": "emulator/chat", "compare": FORBIDDEN},
            FORBIDDEN,
        ),
        (reverse("chat:retry", args=[plain.message_id]), {"model": ""}, "emulator/echo"),
        (reverse("chat:retry", args=[plain.message_id]), {}, FORBIDDEN),
        (reverse("chat:edit", args=[question.pk]), {"content": "uno"}, FORBIDDEN),
        (reverse("chat:continue", args=[plain.message_id]), {}, "emulator/echo"),
        (
            reverse("chat:send", args=[tool_on]),
            {"content": "more", "after": last.message_id},
            FORBIDDEN,
        ),
        (reverse("chat:retry", args=[first.message_id]), {}, FORBIDDEN),
        (reverse("chat:retry", args=[last.message_id]), {}, FORBIDDEN),
        (reverse("chat:retry", args=[last.message_id]), {"model": ""}, "emulator/tools"),
        (reverse("chat:continue", args=[last.message_id]), {}, "emulator/tools"),
        (reverse("chat:edit", args=[tool_question.pk]), {"content": "6 x 7?"}, FORBIDDEN),
    ]
    for url, data, named in routes:
        response = await client.post(url, {"model": FORBIDDEN, **data}, headers=HTMX)
        assert f"may not use &#x27;{named}&#x27;" in refused(response), (url, data)
    # The socket starts nothing: it watches, asks for snapshots and stops, and refuses the rest.
    ws = await socket(on, alice)
    await connect(ws)
    asked = {"t": "send", "c": on, "model": FORBIDDEN, "content": "hi"}
    await ws.send_to(text_data=orjson.dumps(asked).decode())
    assert (await receive(ws))["t"] == "error"
    await ws.disconnect()
    await workers_done()
    assert len(upstream.new()) == before, "nothing went upstream"
    assert await Generation.objects.acount() == generations, "nothing started, nothing billed"
    assert await Conversation.objects.acount() == conversations

    # The model the groups allow goes through each way (a tool turn's next round included).
    for url, data in [
        (reverse("chat:retry", args=[last.message_id]), {}),
        (reverse("chat:send", args=[on]), {"content": "two"}),
    ]:
        response = await client.post(url, {"model": "emulator/chat", **data}, headers=HTMX)
        assert "composer-error" not in response.get("HX-Retarget", ""), url
        await workers_done()
    assert await Generation.objects.acount() == generations + 2


async def test_a_tool_turn_goes_on_with_its_model_when_the_groups_change_meanwhile(
    alice: Any,
) -> None:
    """The tool loop's next round is the stored generation's model, never checked again: the
    turn was allowed when it began."""
    await sync_to_async(in_group)(alice, "Research", models="emulator/tools")
    conversation = await Conversation.objects.acreate(user=alice, tools=["calculator"])
    started = await start_turn(alice, "What is six times seven?", "emulator/tools", conversation.pk)
    await sync_to_async(in_group)(alice, "Research", models="emulator/chat")
    worker.start(started.job)
    await workers_done()
    rounds = Generation.objects.filter(conversation=conversation).order_by("pk")
    assert [(g.model, g.tool_round) async for g in rounds] == [
        ("emulator/tools", 1),
        ("emulator/tools", 2),
    ]


# --- Tools --------------------------------------------------------------------------------------


def test_tools_the_groups_leave_out_are_not_offered_nor_sent(alice: Any, bob: Any) -> None:
    in_group(alice, "Research", tools="calculator\ncurrent_*")
    names = list(tools.registry())
    assert [tool.name for tool in tools.offered(names, alice.pk)] == ["calculator", "current_time"]
    assert [tool.name for tool in tools.offered(names, bob.pk)] == names
    options = RequestOptions(tools=("calculator", "search_conversations"))
    sent = upstream_tools(options, "numes", alice.pk)
    assert [tool["function"]["name"] for tool in sent] == ["calculator"]


def test_settings_offer_only_the_tools_the_groups_allow(alice: Any, client: Any) -> None:
    in_group(alice, "Research", tools="calculator")
    client.force_login(alice)
    html = client.get(reverse("chat:defaults")).content.decode()
    boxes = re.findall(r'<input type="checkbox" name="tools" value="([^"]+)"', html)
    assert boxes == ["calculator"]
