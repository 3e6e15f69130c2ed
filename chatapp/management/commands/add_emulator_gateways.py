"""`manage.py add_emulator_gateways`: the built-in emulator's four dialects as four gateways."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from chatapp.gateways.configs import add_emulator_gateways


class Command(BaseCommand):
    help = "Add the built-in emulator's four dialects (Numes, Osmexo, tiny-3b, Nodul) as gateways."

    def handle(self, *args: Any, **options: Any) -> None:
        for row in add_emulator_gateways():
            self.stdout.write(f"{row.name}: {row.get_dialect_display()}, billed in {row.cost_unit}")
