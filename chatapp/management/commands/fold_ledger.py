"""`manage.py fold_ledger --before DAY [--dry-run]`: retention for the cost ledger.

Folds every finished generation started before DAY (UTC) into daily totals per user, model,
gateway, kind, status, unit and cost source, then deletes those generations, in one transaction
(`chatapp.costs.ledger`); one whose cost is still pending is left (and counted in the output) for a
later run, since its cost settles after. Every total (the sidebar's month, the admin's list and
summary, the CSV) is the same before and after. The only way generations are ever deleted.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from chatapp.costs import ledger


def day(value: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--before: {value!r} is not a day (YYYY-MM-DD)") from None


class Command(BaseCommand):
    help = (
        "Fold generations started before a day (UTC) into daily totals, then delete them; "
        "every cost total stays the same."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--before", type=day, required=True, help="fold generations started before this day"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be folded, change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        before: datetime.date = options["before"]
        today = timezone.now().astimezone(datetime.UTC).date()
        if before > today:
            raise CommandError(f"--before {before} is in the future; today (UTC) is {today}")
        report = ledger.fold(before, dry_run=options["dry_run"])
        if not report.generations:
            self.stdout.write(f"No finished generations started before {before}.")
        else:
            verb = "Would fold" if report.dry_run else "Folded"
            self.stdout.write(
                f"{verb} {report.generations:,} generation(s) from {report.first_day} to "
                f"{report.last_day} into {report.daily_totals:,} daily total(s):"
            )
            for unit in report.per_unit:
                self.stdout.write(f"  {unit}")
        if report.pending:
            self.stdout.write(
                f"Left {report.pending:,} generation(s) whose cost is still pending, for a "
                "later run."
            )
