"""`python -m benchmarks markdown-login`: a page's latency while answers render (issue 19).

One Daphne process of the app (the working tree, or `--app-rev REV` exported) on a fresh SQLite
database, and the emulator in a process of its own (`--tokens-per-second`, 1,000: a fast model).
One signed-in user starts answers that the emulator echoes back: normal markdown answers of
~4,000 tokens and the review's pathological ones (a `registry` fence, 12,500 task items, a
40k-character list, markdown-it's quadratic `![` run), and fetches each answer's page once it
has ended, as a page fetches an answer's render on `done` (completion is read from the database,
not by polling pages). All the while an anonymous client GETs `/accounts/login/` back to back.
Reported: that request's p50, p99 and worst latency, and how many answers ended within
`--seconds`. Prints one table and writes it to `bench/results/markdown-login-<time>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-markdown-login"
ECHO = "emulator/echo"
PATHOLOGICAL = {
    "registry fence": '```registry\n"' + "\\" * 40 + "\n```",
    "12,500 task items": "- [ ] a\n" * 12_500,
    "40k-character list": "".join(
        f"- list item {i:05d} of forty characters.\n" for i in range(1050)
    ),
    "quadratic link scan": "![" * 20_000,
}


def _app(rev: str | None, directory: Path) -> Path:
    if rev is None:
        return ROOT
    app = directory / "app"
    app.mkdir()
    paths = ["chatapp", "gateway_client", "templates", "static", "manage.py", "deploy"]
    archive = subprocess.run(
        ["git", "archive", rev, *paths], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(app)], input=archive, check=True)
    return app


async def _latencies(url: str, until: float) -> list[float]:
    found = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as anonymous:
        while time.monotonic() < until:
            started = time.monotonic()
            response = await anonymous.get("/accounts/login/")
            response.raise_for_status()
            found.append(time.monotonic() - started)
            await asyncio.sleep(0.02)
    return found


async def _answers(
    url: str, cookies: dict[str, str], texts: list[str], until: float, database: Path
) -> int:
    """Start the answers; as a browser does when one ends, fetch its page once."""
    from tests.multiprocess.servers import User

    user = User(cookies, database_url="")
    ended = 0

    def streaming(conversation: int) -> bool:
        with sqlite3.connect(database, timeout=30) as db:
            sql = "SELECT status FROM chatapp_generation WHERE conversation_id = ?"
            rows = db.execute(sql, (conversation,)).fetchall()
        return any(row[0] == "streaming" for row in rows)

    async def one(text: str) -> None:
        nonlocal ended
        conversation = await user.new_conversation(_Endpoint(url), text, ECHO)
        while time.monotonic() < until:
            if not await asyncio.to_thread(streaming, conversation):
                await user.get(_Endpoint(url), f"/c/{conversation}/")
                ended += 1
                return
            await asyncio.sleep(0.5)

    await asyncio.gather(*(one(text) for text in texts), return_exceptions=True)
    return ended


class _Endpoint:
    def __init__(self, url: str) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])


def run(
    rev: str | None, seconds: float, normal: int, pace: float, log_to: str | None = None
) -> dict[str, object]:
    from benchmarks.live_markdown import answer
    from deploy.processes import free_port, stop, wait_for_port
    from tests.multiprocess.servers import sign_in

    directory = Path(tempfile.mkdtemp(prefix="bench-markdown-login-"))
    try:
        app = _app(rev, directory)
        emulator_port = free_port()
        emulator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway_client.emulator",
                "--port",
                str(emulator_port),
                "--tokens-per-second",
                str(pace),
                "--ttft-ms",
                "0",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "CHAT_"))},
            "LLM_BASE_URL": f"http://127.0.0.1:{emulator_port}/numes/api/v1",
            "LLM_API_KEY": "sk-bench",
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
            "DJANGO_SECRET_KEY": "bench-only",
            "ALLOWED_HOSTS": "127.0.0.1",
            "CHAT_GENERATIONS_PER_MINUTE": "1000",
            "PYTHONPATH": str(app),
        }
        script = (
            "from django.contrib.auth import get_user_model\n"
            "from django.core.management import call_command\n"
            "call_command('migrate', interactive=False, verbosity=0)\n"
            f"get_user_model().objects.create_user('bench', password={PASSWORD!r})\n"
        )
        manage = [sys.executable, str(app / "manage.py"), "shell", "--no-imports", "-c", script]
        subprocess.run(manage, env=env, cwd=app, check=True, timeout=300)
        port = free_port()
        daphne = str(Path(sys.executable).parent / "daphne")
        log = (directory / "daphne.log").open("wb")
        server = subprocess.Popen(
            [daphne, "-b", "127.0.0.1", "-p", str(port), "chatapp.asgi:application"],
            env=env,
            cwd=app,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port("daphne", port, server)
            wait_for_port("emulator", emulator_port, emulator)
            url = f"http://127.0.0.1:{port}"
            cookies = sign_in(_Endpoint(url), "bench", PASSWORD)
            texts = [answer(4000) for _ in range(normal)] + list(PATHOLOGICAL.values())

            async def measure() -> tuple[list[float], int]:
                until = time.monotonic() + seconds
                latencies, ended = await asyncio.gather(
                    _latencies(url, until),
                    _answers(url, cookies, texts, until, directory / "db.sqlite3"),
                )
                return latencies, ended

            latencies, ended = asyncio.run(measure())
        finally:
            stop(server, emulator)
            log.close()
            if log_to:
                shutil.copy(directory / "daphne.log", log_to)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    ordered = sorted(latencies)
    return {
        "app": rev or "working tree",
        "tokens_per_second": pace,
        "answers": len(texts),
        "answers_ended": ended,
        "login_requests": len(ordered),
        "login_p50_ms": round(statistics.median(ordered) * 1000, 1),
        "login_p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1),
        "login_max_ms": round(ordered[-1] * 1000, 1),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks markdown-login", description=__doc__
    )
    parser.add_argument("--app-rev", default=None, help="the app at this revision (default: tree)")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--normal", type=int, default=3, help="normal 4,000-token answers")
    parser.add_argument("--tokens-per-second", type=float, default=1000.0)
    parser.add_argument("--log", default=None, help="keep the server's log here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    result = run(args.app_rev, args.seconds, args.normal, args.tokens_per_second, args.log)
    for key, value in result.items():
        print(f"{key:24} {value}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    record = {"benchmark": "markdown-login", "machine": platform.platform(), **result}
    path = out / f"markdown-login-{stamp}.json"
    path.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return 0
