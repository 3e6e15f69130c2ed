"""Run the background tasks: django-tasks-db's worker (`db_worker`), with the knowledge sweep
beside it in a thread (`knowledge.tasks.resume_stale`: files a stopped worker left busy are
queued again), at start and every `CHAT_KNOWLEDGE_SWEEP_INTERVAL` seconds."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from chatapp.knowledge.tasks import resume_stale

logger = logging.getLogger(__name__)


def sweep_forever(stopped: threading.Event) -> None:
    while True:
        try:
            if count := resume_stale():
                logger.info("Queued %d knowledge file(s) a stopped worker left busy", count)
        except Exception:  # the database away for a moment: the next round tries again
            logger.exception("The knowledge sweep failed")
        finally:
            connection.close()  # this thread's own; not held between rounds
        if stopped.wait(settings.CHAT_KNOWLEDGE_SWEEP_INTERVAL):
            return


class Command(BaseCommand):
    help = "Run background tasks (knowledge files' indexing) until stopped (SIGTERM or Ctrl-C)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval", type=float, default=1.0, help="Seconds between looks for a new task."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stopped = threading.Event()
        sweeper = threading.Thread(
            target=sweep_forever, args=(stopped,), name="knowledge-sweep", daemon=True
        )
        sweeper.start()
        try:
            call_command("db_worker", interval=options["interval"], startup_delay=False)
        finally:
            stopped.set()
