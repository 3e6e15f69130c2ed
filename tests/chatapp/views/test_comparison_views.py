"""The composer's send with models to compare, through Django's test client and the emulator:
a new chat's Settings apply to the conversation it makes, and files are refused in words rather
than left behind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.streaming import worker
from tests.chatapp.conftest import logged_in

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
COMPARED = {"content": "Which is larger, 9.9 or 9.11?", "model": "emulator/echo"}


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


async def test_a_new_chats_settings_apply_to_the_comparison_it_starts(alice: Any) -> None:
    client = await logged_in(alice)
    data = {
        **COMPARED,
        "compare": ["emulator/chat"],
        "new_chat_settings": "1",
        "system_prompt": "Answer in French.",
        "temperature": "0.3",
    }
    response = await client.post(reverse("chat:send_new"), data, headers=HTMX)
    assert response.status_code == 200
    await workers_finished()
    conversation = await Conversation.objects.aget(user=alice)
    assert (conversation.system_prompt, conversation.temperature) == ("Answer in French.", 0.3)
    models = [g.model async for g in Generation.objects.filter(conversation=conversation)]
    assert sorted(models) == ["emulator/chat", "emulator/echo"]


async def test_files_with_models_to_compare_are_refused_in_words(alice: Any) -> None:
    client = await logged_in(alice)
    data = {
        **COMPARED,
        "compare": ["emulator/chat"],
        "files": [SimpleUploadedFile("notes.txt", b"some notes", content_type="text/plain")],
    }
    response = await client.post(reverse("chat:send_new"), data, headers=HTMX)
    assert "Files go to one model at a time" in response.content.decode()
    assert not await Message.objects.filter(conversation__user=alice).aexists()
    assert not await Generation.objects.filter(user=alice).aexists()
