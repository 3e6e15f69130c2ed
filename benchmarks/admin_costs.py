"""`python -m benchmarks admin`: the cost admin pages over 100,000 generations (issue 9).

A temporary SQLite database (migrated, WAL, as the app runs it) gets 100,000 generations across
3 gateways, 4 units, 20 models, 10 users and 60 days, with the mix of cost sources a gateway
produces. A superuser then loads each page through Django's test `Client` (the whole stack but the
socket: middleware, admin, templates) and the best of `--runs` wall-clock times is reported.
Prints one table and writes it, with the machine, to `bench/results/admin-<time>.json`.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0  # "well under a second"

# gateway name, dialect, its units (a Numes key billed in sat for some models), models each
GATEWAYS = [
    ("Numes", "numes", ("usd", "sat"), 8),
    ("Osmexo", "osmexo", ("micro_usd",), 6),
    ("Nodul", "nodul", ("pnp",), 6),
]
SOURCES = [("stream", 80), ("record", 8), ("estimate", 6), ("pending", 2), ("unavailable", 3)]
SOURCES += [("not_billed", 1)]


def _amount(unit: str, rng: random.Random) -> Decimal:
    match unit:
        case "usd":
            return Decimal(rng.randint(1, 900_000)).scaleb(-9)
        case "micro_usd":
            return Decimal(rng.randint(10_000, 20_000_000)).scaleb(-3)
        case "sat":
            return Decimal(rng.randint(1, 50_000)).scaleb(-2)
    return Decimal("0.0000081") * rng.randint(1, 400)


@contextmanager
def _recorded_times() -> Iterator[None]:
    """`started_at` is `auto_now_add`: let bulk_create keep the times we give."""
    from chatapp.costs.models import Generation

    field = Generation._meta.get_field("started_at")
    field.auto_now_add = False  # type: ignore[attr-defined]
    try:
        yield
    finally:
        field.auto_now_add = True  # type: ignore[attr-defined]


def seed(generations: int, days: int = 60, users: int = 10, seed: int = 9) -> dict[str, Any]:
    """Fill the (migrated, empty) database; returns what the timed requests filter by."""
    from django.contrib.auth import get_user_model

    from chatapp.conversations.models import Conversation, Message
    from chatapp.costs.models import Generation
    from chatapp.gateways.models import Gateway

    rng = random.Random(seed)
    user_model = get_user_model()
    people = user_model.objects.bulk_create(
        [user_model(username=f"user{index:02}", password="!") for index in range(users)]
    )
    gateways = []
    models: list[tuple[Gateway, str, str]] = []
    for name, dialect, units, count in GATEWAYS:
        gateway = Gateway.objects.create(
            name=name, base_url=f"https://{dialect}.example/api/v1", dialect=dialect,
            cost_unit=units[0],
        )  # fmt: skip
        gateways.append(gateway)
        for index in range(count):
            models.append((gateway, f"{dialect}/model-{index:02}", units[index % len(units)]))
    conversations = Conversation.objects.bulk_create(
        [Conversation(user=person, title=f"chat {n}") for person in people for n in range(20)]
    )
    end = datetime.now(UTC).replace(microsecond=0)
    span = days * 86_400
    sources, weights = zip(*SOURCES, strict=True)
    # Rows go in as the app writes them, oldest first, so the table's order is the time order.
    offsets = sorted((rng.randrange(span) for _ in range(generations)), reverse=True)
    batch = 10_000
    with _recorded_times():
        for offset in range(0, generations, batch):
            size = min(batch, generations - offset)
            chosen = [rng.choice(conversations) for _ in range(size)]
            messages = Message.objects.bulk_create(
                [Message(conversation=c, role="assistant", content="answer") for c in chosen]
            )
            rows = []
            for message, conversation in zip(messages, chosen, strict=True):
                gateway, model, unit = rng.choice(models)
                source = rng.choices(sources, weights)[0]
                priced = source in {"stream", "record", "estimate"}
                started = end - timedelta(seconds=offsets[offset + len(rows)])
                ttft = rng.randint(150, 2500)
                rows.append(
                    Generation(
                        message=message,
                        conversation=conversation,
                        gateway=gateway,
                        model=model,
                        status="streaming" if source == "pending" else "completed",
                        upstream_id=f"gen-{offset}-{len(rows)}",
                        request_id=f"req-{rng.getrandbits(48):012x}",
                        prompt_tokens=rng.randint(10, 4000),
                        completion_tokens=rng.randint(1, 2000),
                        reasoning_tokens=rng.choice([None, rng.randint(0, 500)]),
                        cached_tokens=rng.choice([None, 0, rng.randint(0, 1000)]),
                        cost=_amount(unit, rng) if priced else None,
                        cost_unit=unit if priced else "",
                        cost_source=source,
                        started_at=started,
                        ttft_ms=ttft,
                        first_token_at=started + timedelta(milliseconds=ttft),
                        finished_at=started + timedelta(seconds=rng.randint(2, 40)),
                    )
                )
            Generation.objects.bulk_create(rows)
    first = (end - timedelta(seconds=span)).date()
    return {
        "range": {"started_from": first.isoformat(), "started_to": end.date().isoformat()},
        "gateway": str(gateways[0].pk),
    }


def _git(*command: str) -> str:
    try:
        result = subprocess.run(
            ["git", *command], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return result.stdout.strip()


def _time(client: Any, url: str, runs: int) -> dict[str, Any]:
    seconds = []
    size = 0
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        seconds.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code)
        size = len(body)
    return {"best_s": min(seconds), "median_s": statistics.median(seconds), "bytes": size}


def table(rows: list[dict[str, Any]]) -> str:
    width = max(len(row["page"]) for row in rows)
    lines = [f"{'page':{width}}  {'best ms':>8}  {'median ms':>9}  {'KB':>7}"]
    for row in rows:
        lines.append(
            f"{row['page']:{width}}  {row['best_s'] * 1000:8.1f}  "
            f"{row['median_s'] * 1000:9.1f}  {row['bytes'] / 1000:7.1f}"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks admin", description=__doc__)
    parser.add_argument("--generations", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5, help="requests per page (best is kept)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    directory = Path(tempfile.mkdtemp(prefix="admin-bench-"))
    try:
        return _run(args, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _run(args: argparse.Namespace, directory: Path) -> int:
    # Settings read the environment once, at import: point them at the scratch database first.
    os.environ["DATABASE_URL"] = f"sqlite:///{directory / 'bench.sqlite3'}"
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ["DJANGO_SETTINGS_MODULE"] = "chatapp.settings"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse
    from django.utils.http import urlencode

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    filters = seed(args.generations)
    seeded_s = time.perf_counter() - started  # no ANALYZE: the app never runs one either
    admin = get_user_model().objects.create_superuser("bench-admin", password=None)
    client = Client()
    client.force_login(admin)

    summary = reverse("admin:chatapp_generation_summary")
    changelist = reverse("admin:chatapp_generation_changelist")
    export = reverse("admin:chatapp_generation_export")
    span = urlencode(filters["range"])
    narrowed = urlencode(
        {**filters["range"], "gateway__id__exact": filters["gateway"], "status__exact": "completed"}
    )
    pages = [
        ("summary, 60 days", f"{summary}?{span}"),
        ("summary, 60 days, by model", f"{summary}?{span}&series=model"),
        ("summary, one gateway, completed", f"{summary}?{narrowed}"),
        ("list, all", changelist),
        ("list, one gateway, completed", f"{changelist}?{narrowed}"),
        ("list, search by generation ID", f"{changelist}?q=gen-50000-7"),
        ("CSV, one gateway, completed", f"{export}?{narrowed}"),
    ]
    loadavg = os.getloadavg()
    for _, url in pages:  # warm-up: template loading, first queries
        client.get(url)
    rows = [{"page": name, "url": url, **_time(client, url, args.runs)} for name, url in pages]
    print(
        f"admin pages over {args.generations:,} generations (SQLite, seeded in {seeded_s:.1f} s); "
        f"best of {args.runs} requests through the test Client, wall clock"
    )
    print(table(rows))
    timed = [row for row in rows if not row["page"].startswith("CSV")]
    worst = max(row["best_s"] for row in timed)
    met = "met" if worst < TARGET_S else "NOT met"
    print(f"target: summary and list pages under {TARGET_S:g} s: slowest {worst:.3f} s, {met}")
    payload = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": ["python", "-m", "benchmarks", "admin", *sys.argv[2:]],
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": loadavg,
            "loadavg_after": os.getloadavg(),
            "python": platform.python_version(),
        },
        "app": {"commit": _git("rev-parse", "HEAD"), "dirty": bool(_git("status", "--porcelain"))},
        "data": {"generations": args.generations, "seconds_to_seed": seeded_s},
        "timing": "wall-clock seconds per request (time.perf_counter); best and median",
        "pages": rows,
        "target": {"under_s": TARGET_S, "slowest_s": worst, "met": worst < TARGET_S},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"admin-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    print(f"wrote {path}")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
