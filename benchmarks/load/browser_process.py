"""The simulated-browser process: many tabs on one asyncio loop, all sending at one moment.

Started by the benchmark with a job file, never by hand. One line each way per round on
stdin/stdout (`ready` → `go` → `done`) lets the orchestrator sample the server between setting up
and sending; what every tab observed goes to the results file at the end.

A sign-in costs the server ~0.7 s of PBKDF2 on purpose, so tabs share the cookies of a few
signed-in browsers (`browsers`) as tabs of one browser do, each with its own connections and
socket. The process measures itself (CPU share, event-loop lag) so that a saturated client shows
in the report instead of passing for server latency; per message it only decodes JSON and
appends to lists.
"""

from __future__ import annotations

import asyncio
import dataclasses
import resource
import sys
import time
from typing import Any

import orjson

from .browser import Tab, sign_in
from .observation import Observation

LOAD_CONCURRENCY = 16  # page loads in flight while setting up (not measured)
LAG_TICK_S = 0.02


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _hear() -> str:
    line: str = await asyncio.to_thread(sys.stdin.readline)
    return line.strip()


async def _watch_lag(samples: list[float], stop: asyncio.Event) -> None:
    """How late the loop wakes a sleeper: the delay every timestamp taken here may carry."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        samples.append(time.perf_counter() - started - LAG_TICK_S)


def _lag_summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples) or [0.0]
    return {
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max": ordered[-1],
        "count": len(samples),
    }


async def _ask(tab: Tab, content: str, model: str, seconds: float, obs: Observation) -> None:
    try:
        async with asyncio.timeout(seconds):
            await tab.ask(content, model, obs)
    except TimeoutError:
        obs.error = obs.error or f"no final fragment within {seconds:.0f} s"
    except Exception as exc:  # any failure is a result to report, not a crash
        obs.error = obs.error or repr(exc)[:300]


async def _round(
    tabs: list[Tab], spec: dict[str, Any], prompt: str, warmup_model: str
) -> dict[str, Any] | None:
    gate = asyncio.Semaphore(LOAD_CONCURRENCY)

    async def load(tab: Tab) -> None:
        async with gate:
            await tab.open_home()
            if not spec.get("follow_up"):
                return
            # A follow-up needs a conversation: each tab starts one (not measured) and opens it.
            started = Observation()
            await _ask(tab, "Start a conversation, please.", warmup_model, 60, started)
            if started.error or tab.conversation is None:
                raise RuntimeError(f"a conversation for a follow-up failed: {started.error}")
            await tab.open_conversation(tab.conversation)

    await asyncio.gather(*(load(tab) for tab in tabs))
    _say("ready")
    if await _hear() != "go":
        return None
    observations = [Observation() for _ in tabs]
    lag: list[float] = []
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_lag(lag, stop))
    cpu, started = time.process_time(), time.time()
    await asyncio.gather(
        *(
            _ask(tab, prompt.format(i=i), spec["model"], spec["timeout"], obs)
            for i, (tab, obs) in enumerate(zip(tabs, observations, strict=True))
        )
    )
    ended, cpu = time.time(), time.process_time() - cpu
    stop.set()
    await watcher
    await asyncio.gather(*(tab.leave() for tab in tabs))
    _say("done")
    return {
        "started": started,
        "ended": ended,
        "cpu_seconds": cpu,
        "loop_lag": _lag_summary(lag),
        "observations": [dataclasses.asdict(obs) for obs in observations],
    }


async def run(job: dict[str, Any]) -> dict[str, Any]:
    base = job["base"]
    names = job["usernames"]
    cookies = [
        await sign_in(base, names[n % len(names)], job["password"]) for n in range(job["browsers"])
    ]
    size = max(spec["tabs"] for spec in job["rounds"])
    deflate = job.get("deflate", True)
    tabs = [Tab(base, cookies[i % len(cookies)], deflate=deflate) for i in range(size)]
    rounds: list[dict[str, Any]] = []
    try:
        if job.get("warmup_model"):
            await tabs[0].open_home()
            warm = Observation()
            await _ask(tabs[0], "Warm up, please.", job["warmup_model"], 60, warm)
            if warm.error:
                raise RuntimeError(f"the warm-up answer failed: {warm.error}")
            await tabs[0].leave()
        for spec in job["rounds"]:
            result = await _round(tabs[: spec["tabs"]], spec, job["prompt"], job["warmup_model"])
            if result is None:
                break
            rounds.append(result)
    finally:
        await asyncio.gather(*(tab.aclose() for tab in tabs), return_exceptions=True)
    return {"rounds": rounds}


def main() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(sys.argv[1], "rb") as file:
        job = orjson.loads(file.read())
    results = asyncio.run(run(job))
    with open(job["results"], "wb") as file:
        file.write(orjson.dumps(results))
    _say("finished")


if __name__ == "__main__":
    main()
