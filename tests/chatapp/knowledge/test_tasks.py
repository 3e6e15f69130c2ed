"""`chatapp/knowledge/tasks.py`'s sweep: a busy file that has made no progress for
`CHAT_KNOWLEDGE_STALE_AFTER` is queued again, once, and one whose task still waits is not."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chatapp.knowledge.models import Collection, KnowledgeFile
from chatapp.knowledge.tasks import resume_stale

pytestmark = pytest.mark.django_db
State = KnowledgeFile.State


def test_a_stale_busy_file_is_queued_again_once(
    handbook: Collection, added: Callable[..., KnowledgeFile], settings: Any
) -> None:
    settings.CHAT_KNOWLEDGE_STALE_AFTER = 60
    waiting = added(handbook, "waiting.md", "# A")  # its task still waits to run
    left = added(handbook, "left.md", "# B")
    fresh = added(handbook, "fresh.md", "# C")
    DBTaskResult.objects.exclude(args_kwargs__args=[waiting.pk]).delete()  # as if they ran
    an_hour_ago = timezone.now() - timedelta(hours=1)
    KnowledgeFile.objects.filter(pk__in=[waiting.pk, left.pk]).update(updated_at=an_hour_ago)
    KnowledgeFile.objects.filter(pk=left.pk).update(state=State.EMBEDDING)
    KnowledgeFile.objects.filter(pk=fresh.pk).update(state=State.READING)

    assert resume_stale() == 1
    assert sorted(pk for (pk,) in DBTaskResult.objects.values_list("args_kwargs__args")) == sorted(
        [[waiting.pk], [left.pk]]
    )
    assert resume_stale() == 0  # its new task waits now
