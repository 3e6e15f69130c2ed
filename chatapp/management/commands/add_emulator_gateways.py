"""`manage.py add_emulator_gateways`: every dialect of the built-in emulator as a gateway."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from chatapp.gateways.configs import add_emulator_gateways
from gateway_client.dialects import emulated_dialects

_TITLES = ", ".join(dialect.title for dialect in emulated_dialects())


class Command(BaseCommand):
    help = f"Add the built-in emulator's dialects ({_TITLES}) as gateways."

    def handle(self, *args: Any, **options: Any) -> None:
        for row in add_emulator_gateways():
            self.stdout.write(f"{row.name}: {row.get_dialect_display()}, billed in {row.cost_unit}")
