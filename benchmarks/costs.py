"""`python -m benchmarks costs`: the server's CPU and SQL statements per unit of work (issue 46).

One Daphne process of the app (as `make run` serves it, on SQLite, with the statement counters of
`benchmarks.load.instrumented_app`) and the emulator. For each of two accounts, a new user and
one with a long history seeded with `bulk_create` (`--conversations`, `--generations`), a browser
(`benchmarks.load.browser.Tab`: the page's own requests and socket) does each unit one after
another, `--runs` times:

- home: `GET /`, signed in;
- conversation: `GET /c/<pk>/` of a conversation of 50 messages;
- sidebar: `GET /sidebar/`, the list a tab fetches when another changed it;
- new chat: the POST, a short answer streamed to the tab's socket, its cost settled, the
  fragment the tab fetches on `done`, and the title;
- follow-up: the same on the conversation's page, without a title.

The CPU of a unit is the server's: Daphne's and its render processes' (every descendant),
user plus system time from `/proc/<pid>/stat` before and after, less the idle rate measured
before the runs times the unit's wall time; so a busy machine disturbs it little. What is set up
around a unit (loading the page a send is made from, the socket connecting) is outside the
window. Statements are the server's own count (`dbcount`), read outside the window too. Prints
one table and writes it to `bench/results/costs-<time>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import orjson

from benchmarks.load import stack
from benchmarks.load.browser import Tab, sign_in
from benchmarks.load.observation import Observation

ROOT = Path(__file__).resolve().parent.parent
ECHO = "emulator/echo"
CONVERSATION_MESSAGES = 50
SETTLE_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class UnitCost:
    """One unit's figures over its runs: CPU ms (median and mean) and statements per run."""

    user: str
    unit: str
    runs: int
    cpu_ms_median: float
    cpu_ms_mean: float
    statements: float
    writes: float


# --- Seeding a long history (run inside Django, in a child process) --------------------------


def seed_history(username: str, conversations: int, generations: int) -> None:
    """`conversations` conversations of `username`, each of a question and answers, with
    `generations` completed generations among them, written with `bulk_create`."""
    from datetime import timedelta
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from chatapp.conversations.models import Conversation, Message
    from chatapp.costs.models import Generation
    from chatapp.gateways.models import Gateway

    user = get_user_model().objects.get(username=username)
    gateway = Gateway.objects.order_by("pk").first()
    now = timezone.now()
    made = Conversation.objects.bulk_create(
        [
            Conversation(user=user, title=f"Seeded conversation {n}", gateway=gateway, model=ECHO)
            for n in range(conversations)
        ]
    )
    per = max(1, generations // max(1, conversations))
    field = Generation._meta.get_field("started_at")
    field.auto_now_add = False  # type: ignore[attr-defined]
    for start in range(0, len(made), 100):
        chunk = made[start : start + 100]
        questions = Message.objects.bulk_create(
            [Message(conversation=c, role="user", content="A seeded question") for c in chunk]
        )
        answers = Message.objects.bulk_create(
            [
                Message(conversation=c, role="assistant", parent=q, content="An answer")
                for c, q in zip(chunk, questions, strict=True)
                for _ in range(per)
            ]
        )
        Generation.objects.bulk_create(
            [
                Generation(
                    user=user,
                    user_name=username,
                    message=answer,
                    conversation_id=answer.conversation_id,
                    gateway=gateway,
                    model=ECHO,
                    status="completed",
                    prompt_tokens=10,
                    completion_tokens=20,
                    cost=Decimal("0.000001"),
                    cost_unit="usd",
                    cost_source="stream",
                    started_at=now - timedelta(minutes=n),
                    finished_at=now,
                )
                for n, answer in enumerate(answers)
            ]
        )
        for conversation, answer in zip(chunk, answers[per - 1 :: per], strict=True):
            conversation.current_leaf = answer
        Conversation.objects.bulk_update(chunk, ["current_leaf"])


_SEED = "import django; django.setup(); from benchmarks.costs import seed_history; seed_history({})"


def seed(template: Path, source: Path, username: str, conversations: int, generations: int) -> None:
    env = stack.server_env(template, 9, source)
    code = _SEED.format(f"{username!r}, {conversations}, {generations}")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=900)


# --- The server's CPU --------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(child) for child in f.read().split()]
    return found


def server_cpu(pid: int) -> float:
    """CPU seconds of `pid` and all its descendants (the render pool's processes)."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stack.cpu_seconds(current) or 0.0
        todo += _children(current)
    return total


class Meter:
    """Server CPU and statements of one unit at a time, the idle rate subtracted."""

    def __init__(self, pid: int, stats_url: str) -> None:
        self.pid = pid
        self.stats_url = stats_url
        self.idle_per_s = 0.0
        self.idle_ms_per_s: list[float] = []
        self.samples: dict[tuple[str, str], list[tuple[float, int, int]]] = {}

    def stats(self) -> tuple[int, int]:
        found = httpx.get(self.stats_url, trust_env=False).json()
        return int(found["statements"]), int(found["writes"])

    async def measure_idle(self, seconds: float = 3.0) -> None:
        await asyncio.sleep(0.5)
        cpu, started = server_cpu(self.pid), time.monotonic()
        await asyncio.sleep(seconds)
        self.idle_per_s = (server_cpu(self.pid) - cpu) / (time.monotonic() - started)
        self.idle_ms_per_s.append(round(self.idle_per_s * 1000, 1))

    async def run(self, user: str, unit: str, work: Callable[[], Awaitable[None]]) -> None:
        statements, writes = self.stats()
        cpu, started = server_cpu(self.pid), time.monotonic()
        await work()
        await asyncio.sleep(0.2)  # what the answer's end sets off (pushes, the writer) settles
        spent = server_cpu(self.pid) - cpu - self.idle_per_s * (time.monotonic() - started)
        statements_after, writes_after = self.stats()
        self.samples.setdefault((user, unit), []).append(
            (spent * 1000, statements_after - statements, writes_after - writes)
        )

    def results(self) -> list[UnitCost]:
        return [
            UnitCost(
                user=user,
                unit=unit,
                runs=len(runs),
                cpu_ms_median=round(statistics.median(r[0] for r in runs), 1),
                cpu_ms_mean=round(statistics.fmean(r[0] for r in runs), 1),
                statements=round(statistics.fmean(r[1] for r in runs), 1),
                writes=round(statistics.fmean(r[2] for r in runs), 1),
            )
            for (user, unit), runs in self.samples.items()
        ]


# --- The units -------------------------------------------------------------------------------


async def _socket_ready(tab: Tab) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not tab.socket_open and time.monotonic() < deadline:  # noqa: ASYNC110 (the tab's)
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # the watch and its snapshot check are answered


async def _finished(db: Path, conversation: int, *, title: bool) -> None:
    """Every generation of `conversation` ended, and with `title` its title's too."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        while time.monotonic() < deadline:
            rows = connection.execute(
                "SELECT kind, status FROM chatapp_generation WHERE conversation_id = ?",
                (conversation,),
            ).fetchall()
            running = any(status == "streaming" for _, status in rows)
            titled = any(kind == "title" for kind, _ in rows)
            if not running and (titled or not title):
                return
            await asyncio.sleep(0.02)
    raise RuntimeError(f"conversation {conversation} did not settle")


async def _ask(tab: Tab, content: str) -> None:
    """Send `content` and wait for the answer's fragment, as the page does. A tab that missed
    its `done` (rare: the answer ended while the socket was being told to watch) stops waiting
    after `SETTLE_TIMEOUT_S`; the caller waits for the database either way."""
    obs = Observation()
    try:
        await asyncio.wait_for(tab.ask(content, ECHO, obs), SETTLE_TIMEOUT_S)
    except TimeoutError:
        print(f"the tab missed the end of {content!r}; going on", file=sys.stderr)
        return
    if obs.done_status != "completed" and obs.fragment_status != "completed":
        raise RuntimeError(f"the answer ended {obs.done_status}: {obs.error}")


async def user_units(
    base: str, db: Path, meter: Meter, user: str, username: str, runs: int
) -> None:
    cookies = await sign_in(base, username, stack.PASSWORD)
    tab = Tab(base, cookies)
    try:
        # The conversation of 50 messages the conversation page and the follow-ups use.
        await tab.open_home()
        await _ask(tab, "Question 1")
        conversation = tab.conversation
        assert conversation is not None
        await _finished(db, conversation, title=True)
        for n in range(2, CONVERSATION_MESSAGES // 2 + 1):
            await tab.open_conversation(conversation)
            await _socket_ready(tab)
            await _ask(tab, f"Question {n}")
        await _finished(db, conversation, title=False)
        await tab.leave()
        # Now, not as the server starts: its render processes starting would count as idle.
        await meter.measure_idle()
        headers = {"HX-Request": "true"}
        for unit, path in (
            ("home", "/"),
            ("conversation of 50", f"/c/{conversation}/"),
            ("sidebar", "/sidebar/"),
        ):
            for _ in range(runs):

                async def get(path: str = path) -> None:
                    response = await tab.client.get(path, headers=headers)
                    response.raise_for_status()

                await meter.run(user, unit, get)
        for n in range(runs):
            await tab.open_home()
            await _socket_ready(tab)

            async def new_chat(n: int = n) -> None:
                await _ask(tab, f"A new chat {n}")
                assert tab.conversation is not None
                await _finished(db, tab.conversation, title=True)

            await meter.run(user, "new chat", new_chat)
        for n in range(runs):
            await tab.open_conversation(conversation)
            await _socket_ready(tab)

            async def follow_up(n: int = n) -> None:
                await _ask(tab, f"A follow-up {n}")
                await _finished(db, conversation, title=False)

            await meter.run(user, "follow-up", follow_up)
    finally:
        await tab.aclose()


def _table(results: list[UnitCost]) -> str:
    lines = [
        "| user | unit | server CPU ms (median) | mean | statements | writes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.user} | {r.unit} | {r.cpu_ms_median} | {r.cpu_ms_mean} | "
            f"{r.statements:g} | {r.writes:g} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks costs", description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--generations", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    parser.add_argument("--app-rev", help="run the app at this git revision (default: this tree)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="costs-"))
    source, commit = ROOT, ""
    if args.app_rev:
        source = workdir / "app"
        commit = stack.export_revision(args.app_rev, source)
    big = stack.usernames(2)[1]
    template = stack.prepare_template(workdir, source, accounts=2)
    started = time.monotonic()
    seed(template, source, big, args.conversations, args.generations)
    seeded_s = time.monotonic() - started
    emulator = stack.EmulatorConfig(tokens_per_second=1000, ttft_ms=10, long_tokens=50)
    history = f"{args.conversations:,} conversations, {args.generations:,} generations"
    (workdir / "run").mkdir()
    with stack.Stack(workdir / "run", source, template, emulator) as server:
        meter = Meter(server.server_pid, server.stats_urls[0])

        async def everything() -> None:
            base, db = server.base_url, server.db
            await user_units(base, db, meter, "new user", stack.USERNAME, args.runs)
            await user_units(base, db, meter, history, big, args.runs)

        asyncio.run(everything())
    results = meter.results()
    print(_table(results))
    print(f"idle server CPU (ms/s, each user's): {meter.idle_ms_per_s}; seeding: {seeded_s:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"costs-{time.strftime('%Y%m%d-%H%M%S')}.json"
    commit = (
        commit
        or subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    found = {
        "commit": commit,
        "options": {k: str(v) for k, v in vars(args).items()},
        "loadavg": os.getloadavg(),
        "machine": platform.platform(),
        "idle_ms_per_s": meter.idle_ms_per_s,
        "results": [asdict(r) for r in results],
    }
    out.write_bytes(orjson.dumps(found, option=orjson.OPT_INDENT_2))
    print(f"written to {out}")
    if not args.keep:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    return 0
