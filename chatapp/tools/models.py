"""An admin's switch for a tool (`ToolSwitch`). Registered by `chatapp.models` (app label
`chatapp`)."""

from __future__ import annotations

from django.db import models


class ToolSwitch(models.Model):
    """An admin's switch for one tool (`chatapp/tools`), for every user: a tool without a row is
    on."""

    name = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "tool switches"

    def __str__(self) -> str:
        return f"{self.name} ({'on' if self.enabled else 'off'})"
