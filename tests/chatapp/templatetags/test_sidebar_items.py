"""`{% sidebar_items %}` draws each entry as `_sidebar_item.html` does (`templatetags.sidebar`)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.template import Context, Template
from django.utils import timezone

from chatapp.conversations.models import Conversation
from chatapp.views.library import Entry

pytestmark = pytest.mark.django_db

TITLES = ["", "Plain", "Quotes \" and ' <b>&amp;</b> “curly”", "{{ not a tag }} %s \ue001"]


def _entries(user: Any) -> list[Entry]:
    entries = []
    for n, (title, pinned, imported, current) in enumerate(
        itertools.product(TITLES, [False, True], ["", "chatgpt"], [False, True])
    ):
        conversation = Conversation.objects.create(
            user=user,
            title=title,
            pinned_at=timezone.now() if pinned else None,
            imported_from=imported,
        )
        entries.append(Entry(conversation, current))
        assert n < 100
    return entries


def test_every_combination_is_drawn_as_the_include_draws_it(alice: Any) -> None:
    entries = _entries(alice)
    included = Template(
        '{% for entry in entries %}{% include "chatapp/_sidebar_item.html" with '
        "item=entry.conversation current=entry.current %}{% endfor %}"
    ).render(Context({"entries": entries}))
    stencilled = Template("{% load sidebar %}{% sidebar_items entries %}").render(
        Context({"entries": entries})
    )
    assert stencilled == included
    assert str(entries[-1].conversation.pk) in stencilled


def test_no_entries_draw_nothing() -> None:
    assert (
        Template("{% load sidebar %}{% sidebar_items entries %}").render(Context({"entries": []}))
        == ""
    )
