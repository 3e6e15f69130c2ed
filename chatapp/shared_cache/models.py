"""The version token of what pages keep in memory (`SharedVersion`). Registered by
`chatapp.models` (app label `chatapp`)."""

from __future__ import annotations

import uuid

from django.db import models


class SharedVersion(models.Model):
    """One row whose token changes with every change to what processes keep in memory between
    requests (the tools, the group policies, the assistants, prompts and chat defaults:
    `chatapp.shared_cache`; the gateways: `chatapp.gateways.configs`), written in the
    transaction of the change."""

    ONE = 1
    token = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"Shared version {self.token}"

    @classmethod
    def current(cls) -> str:
        """The token; a database without the row (just made, or flushed) gets one with a new
        token, so that nothing is kept across a flush."""
        token = cls.objects.filter(pk=cls.ONE).values_list("token", flat=True).first()
        if token is None:
            row, _ = cls.objects.get_or_create(pk=cls.ONE, defaults={"token": uuid.uuid4().hex})
            token = row.token
        return token
