"""The version token of what pages keep in memory (`SharedVersion`). Registered by
`chatapp.models` (app label `chatapp`)."""

from __future__ import annotations

from django.db import models


class SharedVersion(models.Model):
    """One row whose token changes with every change to what pages keep in memory between
    requests (the tools, the group policies, the assistants, prompts and chat defaults:
    `chatapp.shared_cache`), written in the transaction of the change."""

    ONE = 1
    token = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"Shared version {self.token}"
