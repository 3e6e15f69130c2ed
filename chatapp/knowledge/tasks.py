"""The background tasks of knowledge collections, on Django's Tasks framework (`settings.TASKS`:
django-tasks-db, whose rows are in the app's database and whose worker `manage.py run_worker`
runs, beside this module's sweep).

One task indexes one file (`ingest.index`), so one file's failure is that file's alone; a
worker runs one task at a time, which bounds how much indexing runs at once (more workers, more
at once). A task is enqueued in the transaction that makes or re-queues its file, so neither
exists without the other. A worker that stops mid-file (a restart, a crash) leaves its file
busy: `resume_stale`, run by every worker at start and every `CHAT_KNOWLEDGE_SWEEP_INTERVAL`,
enqueues it again once it has made no progress for `CHAT_KNOWLEDGE_STALE_AFTER` seconds.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.tasks import TaskResultStatus, task
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chatapp.knowledge import ingest
from chatapp.knowledge.models import KnowledgeFile


@task()
async def index_file(file_pk: int) -> None:
    await ingest.index(file_pk)


def resume_stale() -> int:
    """Enqueue every busy file that has made no progress for `CHAT_KNOWLEDGE_STALE_AFTER` and has
    no task waiting to run; how many. (A waiting task will get to it: another would only wait
    too, and a long queue would gain a copy of each of its files every round.) A file some
    worker is still on is claimed by one run only (`ingest._claim`)."""
    stale = timezone.now() - timedelta(seconds=settings.CHAT_KNOWLEDGE_STALE_AFTER)
    busy = [KnowledgeFile.State.QUEUED, KnowledgeFile.State.READING, KnowledgeFile.State.EMBEDDING]
    waiting = {
        args_kwargs["args"][0]
        for args_kwargs in DBTaskResult.objects.filter(
            status=TaskResultStatus.READY, task_path=index_file.module_path
        ).values_list("args_kwargs", flat=True)
    }
    pks = [
        pk
        for pk in KnowledgeFile.objects.filter(state__in=busy, updated_at__lt=stale).values_list(
            "pk", flat=True
        )
        if pk not in waiting
    ]
    for pk in pks:
        index_file.enqueue(pk)
    return len(pks)
