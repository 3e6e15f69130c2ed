"""The audio a read aloud received (`ReadAloudAudio`). Registered by `chatapp.models` (app label
`chatapp`)."""

from __future__ import annotations

from typing import Any

from django.db import models

from chatapp.conversations.models import Conversation
from chatapp.costs.models import Generation


class ReadAloudAudio(models.Model):
    """The audio a read aloud received, kept so that playing it again costs nothing; it counts as
    completed only once the gateway's generation record confirms it (`Generation.status`)."""

    generation = models.OneToOneField(
        Generation, on_delete=models.CASCADE, related_name="read_aloud_audio"
    )
    media_type = models.CharField(max_length=100)
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Audio of generation {self.generation_id} ({self.media_type})"


def forget_read_aloud_audio(sender: Any, instance: Conversation, **kwargs: Any) -> None:
    """`pre_delete` of a conversation: the audio its answers were read aloud in is their text
    spoken, so it goes with them; the read alouds' generations stay."""
    ReadAloudAudio.objects.filter(generation__conversation=instance).delete()
