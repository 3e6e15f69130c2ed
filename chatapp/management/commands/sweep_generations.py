"""Mark generations whose worker stopped beating as interrupted (e.g. after a server restart)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandParser

from chatapp.streaming.sweep import sweep_stale_generations


class Command(BaseCommand):
    help = "Mark streaming generations with a stale heartbeat as interrupted, keeping their text."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--all",
            action="store_true",
            help="Interrupt every streaming generation (only when no server is running).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        count = async_to_sync(sweep_stale_generations)(stale_after=0 if options["all"] else None)
        self.stdout.write(f"Interrupted {count} generation(s).")
