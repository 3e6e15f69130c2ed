"""Remote images are never loaded: the CSP allows only our origin and `data:`, and a page shows
a remote image, in an answer's text or among its attachments, as a link."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.rendering.markdown import render_markdown, showable_image_url

PNG = "data:image/png;base64,iVBORw0KGgo="
REMOTE = "https://cdn.example/otter.png?for=alice"


def test_only_inline_raster_images_are_showable() -> None:
    assert showable_image_url(PNG) == PNG
    assert showable_image_url(REMOTE) is None
    assert showable_image_url("data:image/svg+xml;base64,PHN2Zz4=") is None


def test_a_remote_image_in_markdown_is_a_link() -> None:
    html = render_markdown(f"![otter]({REMOTE})")
    assert "<img" not in html
    assert '<a href="https://cdn.example/otter.png?for=alice" target="_blank"' in html


@pytest.mark.django_db
def test_a_remote_image_attachment_is_a_link_and_the_csp_loads_none(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Otters")
    question = Message.objects.create(conversation=conversation, role="user", content="Otters?")
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        parent=question,
        content="Here.",
        attachments=[{"kind": "image_url", "url": PNG}, {"kind": "image_url", "url": REMOTE}],
    )
    Generation.objects.create(
        message=answer, conversation=conversation, model="emulator/image", status="completed"
    )
    client = Client()
    client.force_login(alice)
    response = client.get(reverse("chat:message", args=[answer.pk]))
    page = response.content.decode()
    assert re.findall(r'<img class="image" src="([^"]+)"', page) == [PNG]
    assert (
        '<a class="image-link" href="https://cdn.example/otter.png?for=alice" target="_blank"'
        ' rel="noopener nofollow">'
    ) in page
    img_src = re.search(r"img-src ([^;]+)", response["Content-Security-Policy"])
    assert img_src is not None
    assert img_src[1].split() == ["'self'", "data:"]
