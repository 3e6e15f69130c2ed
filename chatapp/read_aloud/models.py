"""The audio a read aloud received (`ReadAloudAudio`). Registered by `chatapp.models` (app label
`chatapp`)."""

from __future__ import annotations

from django.db import models

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
