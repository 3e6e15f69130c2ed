"""What a user sees of their own spend (`costs/spend.py`): one line a person can read, dollars
added up, other units named by gateway, the unpriced ones saying why, the not billed left out,
and a title still being written not yet an answer without an amount."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatapp.conversations.models import Conversation
from chatapp.costs.models import Generation
from chatapp.costs.spend import conversation_spend, month_spend
from chatapp.gateways.models import Gateway

pytestmark = pytest.mark.django_db

STREAM = Generation.CostSource.STREAM


def settled(user: Any, conversation: Conversation | None = None, **fields: Any) -> Generation:
    fields.setdefault("status", Generation.Status.COMPLETED)
    return Generation.objects.create(
        user=user, conversation=conversation, model="emulator/chat", **fields
    )


def answered(user: Any) -> Conversation:
    """A conversation with one priced answer, as it is when its first answer has just ended."""
    conversation = Conversation.objects.create(user=user, title="Otters")
    settled(user, conversation, cost=Decimal("0.002"), cost_unit="usd", cost_source=STREAM)
    return conversation


def titled(conversation: Conversation, status: Generation.Status, **fields: Any) -> Generation:
    return Generation.objects.create(
        user=conversation.user,
        conversation=conversation,
        kind=Generation.Kind.TITLE,
        model="emulator/title",
        status=status,
        **fields,
    )


def text_of(html: str, element_id: str) -> str:
    found = re.search(rf'<p id="{element_id}" class="spend">(.*?)</p>', html, re.S)
    assert found, f"no #{element_id}"
    return re.sub(r"<[^>]+>", "", found[1])


def test_a_title_still_running_is_not_an_answer_without_an_amount(alice: Any) -> None:
    conversation = answered(alice)
    titled(conversation, Generation.Status.STREAMING)
    for spend in (conversation_spend(conversation.pk), month_spend(alice)):
        assert spend.unpriced == ()
        assert spend.dollars is not None
        assert spend.dollars.amount == Decimal("0.002")


def test_a_title_that_ended_without_an_amount_counts_once_its_cost_is_settled(
    alice: Any,
) -> None:
    conversation = answered(alice)
    title = titled(conversation, Generation.Status.FAILED)  # its cost still pending
    assert (conversation_spend(conversation.pk).unpriced, month_spend(alice).unpriced) == ((), ())
    title.cost_source = Generation.CostSource.UNAVAILABLE
    title.save()
    for spend in (conversation_spend(conversation.pk), month_spend(alice)):
        assert [str(unpriced) for unpriced in spend.unpriced] == [
            "1 answer without an amount (the gateway reports no price)"
        ]


def test_the_header_does_not_grow_while_the_title_is_written(alice: Any, password: str) -> None:
    conversation = answered(alice)
    titled(conversation, Generation.Status.STREAMING)
    client = Client()
    client.login(username=alice.username, password=password)
    html = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert 'id="conversation-spend"' in html
    assert "without an amount" not in html


def test_the_spend_line_reads_as_one_figure_per_currency_named_by_gateway(
    alice: Any, password: str
) -> None:
    """#45: "$0.0070244 · $0.000167 · 0.0003219 PnP · 2 answers without an amount", where the
    second "$" was Osmexo's micro-dollars and one of the two was a refusal not billed."""
    numes = Gateway.objects.create(name="Numes", base_url="https://n.example", cost_unit="usd")
    osmexo = Gateway.objects.create(
        name="Osmexo", base_url="https://o.example", cost_unit="micro_usd"
    )
    nodul = Gateway.objects.create(name="Nodul", base_url="https://d.example", cost_unit="pnp")
    tiny = Gateway.objects.create(name="tiny-3b", base_url="https://t.example", cost_unit="credits")
    conversation = Conversation.objects.create(user=alice, title="Costs")
    for gateway, amount, unit in (
        (numes, "0.0070244", "usd"),
        (osmexo, "167", "micro_usd"),
        (nodul, "0.0003219", "pnp"),
    ):
        settled(
            alice,
            conversation,
            gateway=gateway,
            cost=Decimal(amount),
            cost_unit=unit,
            cost_source=STREAM,
        )
    settled(alice, conversation, gateway=tiny, cost_source=Generation.CostSource.UNAVAILABLE)
    settled(
        alice,
        conversation,
        gateway=numes,
        status=Generation.Status.FAILED,
        cost_source=Generation.CostSource.NOT_BILLED,
        cost_note="refused before the answer began",
    )

    client = Client()
    client.login(username=alice.username, password=password)
    html = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()

    line = (
        "$0.00719 · 0.000322 PnP on Nodul · 1 answer without an amount (tiny-3b reports no price)"
    )
    assert text_of(html, "month-spend") == f"Your spend this month: {line}"
    assert text_of(html, "conversation-spend") == f"This conversation: {line}"
    month = month_spend(alice)
    assert month.dollars is not None
    assert month.dollars.amount == Decimal("0.0071914"), "exact: dollars and micro-dollars added"
    assert month.not_billed == 1


def test_estimates_are_marked_and_nothing_yet_says_so(alice: Any, password: str) -> None:
    client = Client()
    client.login(username=alice.username, password=password)
    assert "Your spend this month: nothing yet" in client.get("/").content.decode()
    settled(
        alice, cost=Decimal("1.234"), cost_unit="usd", cost_source=Generation.CostSource.ESTIMATE
    )
    settled(alice, cost=Decimal("1"), cost_unit="usd", cost_source=STREAM)
    html = client.get("/").content.decode()
    assert text_of(html, "month-spend") == "Your spend this month: $2.23 (≈, $1.23 estimated)"
