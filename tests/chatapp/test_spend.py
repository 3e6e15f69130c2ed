"""What a user sees of their own spend: a title still being written is not yet an answer
without an amount, in the conversation's header or the month's total."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatapp.costs.spend import conversation_spend, month_spend
from chatapp.models import Conversation, Generation

pytestmark = pytest.mark.django_db


def answered(user: Any) -> Conversation:
    """A conversation with one priced answer, as it is when its first answer has just ended."""
    conversation = Conversation.objects.create(user=user, title="Otters")
    Generation.objects.create(
        user=user,
        conversation=conversation,
        model="emulator/chat",
        status=Generation.Status.COMPLETED,
        cost=Decimal("0.002"),
        cost_unit="usd",
        cost_source=Generation.CostSource.STREAM,
    )
    return conversation


def titled(conversation: Conversation, status: Generation.Status) -> Generation:
    return Generation.objects.create(
        user=conversation.user,
        conversation=conversation,
        kind=Generation.Kind.TITLE,
        model="emulator/title",
        status=status,
    )


def test_a_title_still_running_is_not_an_answer_without_an_amount(alice: Any) -> None:
    conversation = answered(alice)
    titled(conversation, Generation.Status.STREAMING)
    for spend in (conversation_spend(conversation), month_spend(alice)):
        assert (spend.generations, spend.unpriced) == (1, 0)
        assert [total.amount for total in spend.totals] == [Decimal("0.002")]


def test_a_title_that_ended_without_an_amount_counts(alice: Any) -> None:
    conversation = answered(alice)
    titled(conversation, Generation.Status.FAILED)
    assert (conversation_spend(conversation).unpriced, month_spend(alice).unpriced) == (1, 1)


def test_the_header_does_not_grow_while_the_title_is_written(alice: Any, password: str) -> None:
    conversation = answered(alice)
    titled(conversation, Generation.Status.STREAMING)
    client = Client()
    client.login(username=alice.username, password=password)
    html = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert 'id="conversation-spend"' in html
    assert "without an amount" not in html
