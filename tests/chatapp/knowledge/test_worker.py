"""The task worker as a separate real process (`manage.py run_worker`, as `make run` starts it):
files added in this process are indexed there, through the emulator's real `/embeddings`; a
file a stopped worker left mid-embedding is picked up by the next worker's sweep."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from chatapp.costs.models import Generation
from chatapp.knowledge.models import Collection, KnowledgeFile
from deploy.processes import stop, tail
from tests.pdf_bytes import pdf_bytes
from tests.waiting import poll

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("embedding_gateway")]
ROOT = Path(__file__).resolve().parents[3]
State = KnowledgeFile.State


@contextmanager
def worker(log: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "LLM_BASE_URL": settings.LLM_BASE_URL,
        "LLM_API_KEY": settings.LLM_API_KEY,
        **env,
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "run_worker", "--interval", "0.1"],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        stop(process)


def state_of(file: KnowledgeFile, process: subprocess.Popen[bytes], log: Path) -> Callable[[], Any]:
    def ready() -> bool:
        assert process.poll() is None, tail(log)
        file.refresh_from_db()
        assert file.state != State.FAILED, file.error
        return file.state == State.READY

    return ready


def test_the_worker_process_indexes_added_files_and_resumes_a_stopped_ones(
    handbook: Collection, added: Callable[..., KnowledgeFile], tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    markdown = added(handbook, "rules.md", "# Leave\n\nThirty days.\n\n# Travel\n\nBy train.")
    pdf = added(handbook, "guide.pdf", pdf_bytes("Badges open doors", "Lunch is at noon"))
    with worker(log) as process:
        poll(state_of(markdown, process, log), what="the Markdown file ready", within=60)
        poll(state_of(pdf, process, log), what="the PDF ready", within=60)
    assert (markdown.done, markdown.total, pdf.done, pdf.total) == (2, 2, 2, 2)
    calls = Generation.objects.filter(kind=Generation.Kind.EMBEDDING, collection=handbook)
    assert calls.count() == 2

    # As a worker killed after embedding one of the two chunks leaves it.
    KnowledgeFile.objects.filter(pk=markdown.pk).update(
        state=State.EMBEDDING, done=1, updated_at=timezone.now() - timedelta(seconds=5)
    )
    with worker(log, CHAT_KNOWLEDGE_STALE_AFTER="1") as process:
        poll(state_of(markdown, process, log), what="the file picked up again", within=60)
    assert markdown.done == 2
    assert calls.count() == 3  # the one chunk without a vector, embedded in one call
