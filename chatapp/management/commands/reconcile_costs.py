"""`manage.py reconcile_costs`: settle every cost still pending (for cron), then check the
running totals against the ledger.

Asks the gateway's generation record where it keeps one, else estimates or states the reason
(see `chatapp.costs.costing`). A gateway that is down leaves its costs pending for a later run;
running it twice changes nothing the first run settled. Every running total
(`running_totals.SpendTotal`) that differs from the ledger's sum is reported, and repaired
unless `--dry-run` (`totals_check`).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from chatapp.conversations.presentation import format_cost
from chatapp.costs import reconcile, totals_check
from chatapp.costs.costing import Lookup, record_expected, settle_cost_now
from chatapp.costs.models import Generation
from chatapp.gateways.clients import close_clients, shared_client
from chatapp.gateways.configs import GatewayConfig, GatewayUnavailable, config_for

CONCURRENT_LOOKUPS = 8


def since(value: str) -> datetime:
    """`7d`, `2026-11-01` or an ISO date-time."""
    if value.endswith("d") and value[:-1].isdigit():
        return timezone.now() - timedelta(days=int(value[:-1]))
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise CommandError(f"--since: {value!r} is not a date, a date-time or Nd")
        moment = datetime(day.year, day.month, day.day)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


async def _look_up_all(
    work: list[tuple[Generation, GatewayConfig]],
) -> list[Lookup]:
    limit = asyncio.Semaphore(CONCURRENT_LOOKUPS)

    async def one(generation: Generation, config: GatewayConfig) -> Lookup:
        async with limit:
            return await reconcile.look_up(
                shared_client(config), generation.upstream_id, expected=record_expected(generation)
            )

    try:
        return await asyncio.gather(*(one(g, c) for g, c in work))
    finally:
        await close_clients()


class Command(BaseCommand):
    help = "Settle pending generation costs: from the gateway's record, an estimate, or a reason."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since", type=since, help="only generations started since (7d, a date)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would change, write nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        pending = Generation.objects.filter(cost_source=Generation.CostSource.PENDING).exclude(
            status=Generation.Status.STREAMING
        )
        if options["since"] is not None:
            pending = pending.filter(started_at__gte=options["since"])
        work: list[tuple[Generation, GatewayConfig]] = []
        skipped = 0
        for generation in pending.order_by("pk"):
            try:
                work.append((generation, config_for(generation.gateway_id)))
            except GatewayUnavailable:
                skipped += 1
                self.stdout.write(
                    f"generation {generation.pk}: its gateway is disabled; left pending"
                )
        lookups = async_to_sync(_look_up_all)(work)
        changed = 0
        for (generation, _), lookup in zip(work, lookups, strict=True):
            with transaction.atomic():
                settled = settle_cost_now(generation.pk, lookup)
                row = Generation.objects.get(pk=generation.pk)
                if options["dry_run"]:
                    transaction.set_rollback(True)
            label = f"generation {generation.pk}" + (
                f" ({generation.upstream_id})" if generation.upstream_id else ""
            )
            if settled.changed:
                changed += 1
                self.stdout.write(f"{label}: {row.get_cost_source_display()}: {format_cost(row)}")
            elif not lookup.reached:
                self.stdout.write(f"{label}: the gateway could not be reached; left pending")
            else:
                self.stdout.write(f"{label}: no record yet; left pending")
        verb = "Would settle" if options["dry_run"] else "Settled"
        self.stdout.write(f"{verb} {changed} of {len(work) + skipped} pending cost(s).")
        drifts = totals_check.check(repair=not options["dry_run"])
        for drift in drifts:
            self.stdout.write(f"running total {drift}")
        if drifts:
            verb = "would be repaired" if options["dry_run"] else "repaired"
            self.stdout.write(f"{len(drifts)} running total(s) differed from the ledger; {verb}.")
        else:
            self.stdout.write("The running totals match the ledger.")
