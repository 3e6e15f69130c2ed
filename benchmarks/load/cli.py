"""`python -m benchmarks load`: streaming under load end to end (issue 8); see benchmarks/README.md.

Parses the options, prepares the run (the app's source, a migrated template database, a temporary
directory removed at the end unless `--keep`), runs the levels, the ceiling search and the growth
check asked for, then prints one table and writes the JSON under `bench/results/`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import report
from .runner import Deadline, DeadlineExceeded, Settings, run_growth, run_level, search_ceiling
from .stack import APP_PATHS, ROOT, EmulatorConfig, export_revision, prepare_template

DEFAULT_LEVELS = (50, 200)


def _levels(text: str) -> list[int]:
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("give concurrency levels like 50,200")
    return levels


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks load", description=__doc__)
    add = parser.add_argument
    add("--concurrency", type=_levels, help="levels to run, e.g. 1,10 (default 50,200)")
    add("--ceiling", action="store_true", help="search the concurrency where p99s pass --limit-ms")
    add("--ceiling-start", type=int, default=50)
    add("--ceiling-max", type=int, default=1600)
    add("--limit-ms", type=float, default=250.0, help="p99 TTFT-added and gap limit (ceiling)")
    add("--growth", type=int, metavar="N", help="also run N short answers in waves (RSS growth)")
    add("--wave", type=int, default=100, help="answers per growth wave")
    add("--growth-tokens", type=int, default=40, help="answer length in the growth check")
    add("--tokens", type=int, default=500, help="answer length (emulator `long` tokens)")
    add("--tokens-per-second", type=float, default=50.0)
    add("--ttft-ms", type=int, default=400, help="the emulator's time to first token")
    add("--follow-ups", action="store_true", help="send follow-ups, not new chats")
    add("--no-deflate", action="store_true", help="sockets without permessage-deflate")
    add("--browsers", type=int, default=4, help="signed-in browsers the tabs share")
    add("--accounts", type=int, default=1, help="users the browsers sign in as (default: one)")
    add("--level-timeout", type=float, default=180.0, help="seconds for one level's answers")
    add("--deadline", type=float, default=1800.0, help="hard cap on the whole run, seconds")
    add("--app-rev", help="run the app as of this git revision (e.g. HEAD) instead of the tree")
    add("--quiet-threshold", type=float, default=15.0, help="%% of the machine others may use")
    add("--quiet-wait", type=float, default=120.0, help="seconds to wait for a quiet machine")
    add("--plain", action="store_true", help="serve chatapp.asgi:application (no DB counters)")
    add(
        "--processes",
        type=int,
        default=1,
        help="Daphne processes; 2 or more: PostgreSQL, Redis and nginx as `make cluster`",
    )
    add("--out", type=Path, default=ROOT / "bench" / "results")
    add("--keep", action="store_true", help="keep the run's directory (logs, databases)")
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be 1 or more")
    if args.processes > 1 and args.growth:
        parser.error("--growth measures one process's memory: it takes no --processes")
    if args.concurrency is None and not (args.ceiling or args.growth):
        args.concurrency = list(DEFAULT_LEVELS)
    return args


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _app_version(args: argparse.Namespace, workdir: Path) -> tuple[Path, dict[str, Any]]:
    if args.app_rev:
        source = workdir / "app"
        return source, {"revision": args.app_rev, "commit": export_revision(args.app_rev, source)}

    def git(*command: str) -> str:
        return subprocess.run(
            ["git", *command], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    dirty = bool(git("status", "--porcelain", "--", *APP_PATHS))
    return ROOT, {"revision": "working tree", "commit": git("rev-parse", "HEAD"), "dirty": dirty}


def _levels_run(
    settings: Settings, levels: list[int], deadline: Deadline, failures: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    summaries = []
    for level in levels:
        _say(f"level {level}: starting")
        started = time.monotonic()
        try:
            summaries.append(run_level(settings, level, deadline))
        except DeadlineExceeded:
            failures.append({"concurrency": level, "error": "the run's deadline passed"})
            break
        except Exception as exc:  # one failed level is a result; the others still run
            failures.append({"concurrency": level, "error": str(exc)[:3000]})
            _say(f"level {level}: failed: {str(exc)[:3000]}")
            continue
        _say(f"level {level}: done in {time.monotonic() - started:.0f} s")
    return summaries


def main(argv: list[str]) -> int:
    args = parse(argv)
    # SIGTERM unwinds like Ctrl-C, so every `finally` stops its processes and the directory goes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    deadline = Deadline(args.deadline)
    workdir = Path(tempfile.mkdtemp(prefix="gateway-chat-load-"))
    payload: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": ["python", "-m", "benchmarks", "load", *argv],
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": os.getloadavg(),
            "python": platform.python_version(),
        },
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    failures: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    try:
        source, payload["app"] = _app_version(args, workdir)
        _say(f"app: {payload['app']}; run directory {workdir}")
        settings = Settings(
            workdir=workdir,
            source=source,
            template=prepare_template(workdir, source, args.accounts),
            emulator=EmulatorConfig(args.tokens_per_second, args.ttft_ms, args.tokens),
            browsers=args.browsers,
            accounts=args.accounts,
            level_timeout=args.level_timeout,
            plain=args.plain,
            cpus=os.cpu_count() or 1,
            quiet_threshold=args.quiet_threshold,
            quiet_wait=args.quiet_wait,
            follow_ups=args.follow_ups,
            deflate=not args.no_deflate,
            processes=args.processes,
        )
        if args.concurrency:
            summaries += _levels_run(settings, args.concurrency, deadline, failures)
        if args.ceiling:
            found, good, bad = search_ceiling(
                settings, args.ceiling_start, args.ceiling_max, args.limit_ms, deadline
            )
            summaries += found
            payload["ceiling"] = {"limit_ms": args.limit_ms, "passes": good, "fails": bad}
        if args.growth:
            short = dataclasses.replace(
                settings,
                emulator=dataclasses.replace(settings.emulator, long_tokens=args.growth_tokens),
            )
            try:
                payload["growth"] = run_growth(short, args.growth, args.wave, deadline)
                if payload["growth"]["error"]:
                    failures.append({"growth": args.growth, "error": payload["growth"]["error"]})
            except Exception as exc:
                failures.append({"growth": args.growth, "error": str(exc)[:3000]})
    finally:
        payload["levels"] = summaries
        payload["failures"] = failures
        if args.keep:
            _say(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summaries.sort(key=lambda s: s["concurrency"])
    if summaries:
        print(report.table(summaries))
    if "ceiling" in payload:
        ceiling = payload["ceiling"]
        print(
            f"\nceiling at p99 <= {args.limit_ms:.0f} ms: passes at {ceiling['passes']}, "
            f"fails at {ceiling['fails']}"
        )
    if "growth" in payload:
        print("\n" + report.growth_table(payload["growth"]))
    for problem in [p for s in summaries for p in s["problems"]][:10]:
        print(f"problem: {problem}")
    for failure in failures:
        print(f"failed: {failure}")
    print(f"\nwrote {report.write_json(args.out, payload)}")
    return 1 if failures or any(s["completed"] < s["streams"] for s in summaries) else 0
