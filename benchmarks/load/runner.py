"""Running the benchmark: a level is one fresh stack, one crowd of tabs, samples and a summary.

Every wait has a limit: a level's setup and its round each have a timeout, and all of them are cut
to what is left of the run's hard deadline (`Deadline`); a level that runs out is reported as
failed and its processes are stopped in `finally` like every other. The orchestrator (this
process) does no measured work: it only starts processes, samples, and joins the results.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from deploy.processes import tail

from . import memory, metrics
from .cluster import ClusterStack
from .database import final_rows, max_generation
from .sampler import Sampler, idle_cpu_per_s, read_counters, total_rss_kb
from .stack import (
    PASSWORD,
    ROOT,
    EmulatorConfig,
    Stack,
    cpu_seconds,
    die_with_parent,
    machine_busy_seconds,
    proc_status_kb,
    stop,
    usernames,
)

MODEL = "emulator/long"
WARMUP_MODEL = "emulator/echo"
PROMPT = "Explain streaming number {i} under load, with examples"
SETUP_TIMEOUT_S = 300.0


class DeadlineExceeded(Exception):
    """The run's hard cap was reached."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def cap(self, seconds: float) -> float:
        left = self.end - time.monotonic()
        if left <= 1:
            raise DeadlineExceeded("the run's deadline has passed")
        return min(seconds, left)


def others_busy_percent(seconds: float = 3.0) -> float:
    """How busy the machine is without us (run between levels, when none of ours is running)."""
    before = machine_busy_seconds()
    time.sleep(seconds)
    return (machine_busy_seconds() - before) / (seconds * (os.cpu_count() or 1)) * 100


def wait_for_quiet(threshold: float, most: float, deadline: Deadline) -> float:
    """Wait (at most `most` seconds) until other processes use under `threshold` % of the
    machine: figures taken beside a test suite measure the suite. The last reading."""
    until = time.monotonic() + deadline.cap(most)
    busy = others_busy_percent()
    while busy >= threshold and time.monotonic() < until:
        busy = others_busy_percent()
    return busy


@dataclass(frozen=True, slots=True)
class Settings:
    workdir: Path
    source: Path
    template: Path
    emulator: EmulatorConfig
    browsers: int
    level_timeout: float
    plain: bool
    cpus: int
    quiet_threshold: float
    quiet_wait: float
    follow_ups: bool = False  # each tab sends a follow-up in a conversation it started
    deflate: bool = True  # the tabs' sockets offer permessage-deflate
    processes: int = 1  # 2 or more: `ClusterStack` (PostgreSQL, Redis, nginx), as `make cluster`
    accounts: int = 1  # the users the browsers are (browser i is account i mod `accounts`)


def level_stack(settings: Settings, workdir: Path) -> Stack | ClusterStack:
    if settings.processes > 1:
        return ClusterStack(
            workdir,
            settings.source,
            settings.emulator,
            settings.processes,
            plain=settings.plain,
            accounts=settings.accounts,
        )
    return Stack(
        workdir, settings.source, settings.template, settings.emulator, plain=settings.plain
    )


class Crowd:
    """The simulated-browser process, driven line by line (`ready` / `go` / `done`)."""

    def __init__(self, job: dict[str, Any], workdir: Path) -> None:
        self.results_path = workdir / "crowd-results.json"
        self.log = workdir / "crowd.log"
        job_path = workdir / "crowd-job.json"
        job_path.write_bytes(orjson.dumps({**job, "results": str(self.results_path)}))
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.load.browser_process", str(job_path)],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def expect(self, word: str, seconds: float) -> None:
        try:
            line = self._lines.get(timeout=seconds)
        except queue.Empty:
            raise TimeoutError(f"the crowd did not say {word!r} within {seconds:.0f} s") from None
        if line != word:
            raise RuntimeError(f"the crowd said {line!r}, not {word!r}:\n{tail(self.log)}")

    def say(self, word: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()

    def results(self) -> dict[str, Any]:
        results: dict[str, Any] = orjson.loads(self.results_path.read_bytes())
        return results

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.say("quit")
        stop(self.process)


def _probe(stack: Stack | ClusterStack, crowd: Crowd, client: httpx.Client) -> metrics.Probe:
    """CPU by process ("server" is the sum of a cluster's "server-1"..., each kept as well), and
    RSS summed over the Daphne processes."""
    pids = {**stack.pids, "crowd": crowd.process.pid, "orchestrator": os.getpid()}
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    servers = list(stack.server_pids.values())
    if len(servers) > 1:
        each = [cpu[name] for name in stack.server_pids]
        cpu = {"server": None if None in each else sum(c or 0 for c in each), **cpu}
    hwm = [proc_status_kb(pid, "VmHWM") for pid in servers]
    return metrics.Probe(
        at=time.time(),
        rss_kb=total_rss_kb(servers),
        hwm_kb=None if None in hwm else sum(kb or 0 for kb in hwm),
        cpu=cpu,
        machine_busy_s=machine_busy_seconds(),
        counters=read_counters(client, stack.stats_urls),
    )


def _records(stack: Stack | ClusterStack, client: httpx.Client) -> dict[str, dict[str, Any]]:
    records = client.get(stack.emulator_url + "/__bench__/records").json()
    return {record["id"]: record for record in records}


def _job(
    stack: Stack | ClusterStack, settings: Settings, rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "base": stack.base_url,
        "usernames": usernames(settings.accounts),
        "password": PASSWORD,
        "browsers": min(settings.browsers, max(spec["tabs"] for spec in rounds)),
        "rounds": rounds,
        "warmup_model": WARMUP_MODEL,
        "prompt": PROMPT,
        "deflate": settings.deflate,
    }


IDLE_S = 2.0  # seconds the server's idle CPU is measured before "go"


def run_level(settings: Settings, concurrency: int, deadline: Deadline) -> dict[str, Any]:
    """All `concurrency` tabs send at once on a fresh server; the level's summary."""
    workdir = settings.workdir / f"level-{concurrency}-{time.strftime('%H%M%S')}"
    workdir.mkdir()
    busy_before = wait_for_quiet(settings.quiet_threshold, settings.quiet_wait, deadline)
    timeout = deadline.cap(settings.level_timeout)
    with (
        level_stack(settings, workdir) as stack,
        httpx.Client(trust_env=False, timeout=10) as client,
    ):
        crowd = Crowd(
            _job(
                stack,
                settings,
                [
                    {
                        "tabs": concurrency,
                        "model": MODEL,
                        "timeout": timeout,
                        "follow_up": settings.follow_ups,
                    }
                ],
            ),
            workdir,
        )
        sampler: Sampler | None = None
        try:
            crowd.expect("ready", deadline.cap(SETUP_TIMEOUT_S))
            after = max_generation(stack.database)
            servers = list(stack.server_pids.values())
            idle = idle_cpu_per_s(servers, IDLE_S)
            sampler = Sampler(servers, stack.stats_urls, stack.database, after)
            start = _probe(stack, crowd, client)
            sampler.start()
            crowd.say("go")
            crowd.expect("done", deadline.cap(timeout + 30))
            end = _probe(stack, crowd, client)
            processes = {
                name: {field: proc_status_kb(pid, field) for field in ("VmRSS", "VmHWM")}
                for name, pid in stack.server_pids.items()
            }
            samples = sampler.stop()
            samples.idle_cpu_per_s = idle
            sampler = None
            crowd.expect("finished", deadline.cap(60))
            results = crowd.results()["rounds"][0]
            records = _records(stack, client)
            rows = final_rows(stack.database, after)
        finally:
            if sampler is not None:
                sampler.stop()
            crowd.close()
    summary = metrics.summarize(
        concurrency,
        results["observations"],
        records,
        rows,
        samples,
        start,
        end,
        results,
        settings.emulator.tokens_per_second,
        settings.cpus,
    )
    summary["others_cpu_percent_before"] = busy_before
    summary["server_processes_kb"] = processes  # at the round's end; CPU in "cpu_percent"
    return summary


def run_growth(settings: Settings, total: int, wave: int, deadline: Deadline) -> dict[str, Any]:
    """`total` short answers in waves of `wave` on one server; its RSS after each wave."""
    workdir = settings.workdir / f"growth-{time.strftime('%H%M%S')}"
    workdir.mkdir()
    waves = [min(wave, total - i) for i in range(0, total, wave)]
    wait_for_quiet(settings.quiet_threshold, settings.quiet_wait, deadline)
    timeout = deadline.cap(settings.level_timeout)
    rounds = [{"tabs": n, "model": MODEL, "timeout": timeout} for n in waves]
    out: list[dict[str, Any]] = []
    with (
        Stack(
            workdir, settings.source, settings.template, settings.emulator, plain=settings.plain
        ) as stack,
        httpx.Client(trust_env=False, timeout=30) as client,
    ):
        environment = memory.allocator_environment(stack.server_pid)
        crowd = Crowd(_job(stack, settings, rounds), workdir)
        error = None
        try:
            done = 0
            for number, n in enumerate(waves, start=1):
                crowd.expect("ready", deadline.cap(SETUP_TIMEOUT_S))
                crowd.say("go")
                crowd.expect("done", deadline.cap(timeout + 30))
                done += n
                time.sleep(1.0)  # let finished workers and sockets be collected
                rss = proc_status_kb(stack.server_pid, "VmRSS")
                out.append({"generations": done, "rss_kb": rss, "loadavg": os.getloadavg()[0]})
                out[-1] |= _memory(stack, client, trim=number == len(waves))
            crowd.expect("finished", deadline.cap(60))
            for entry, result in zip(out, crowd.results()["rounds"], strict=True):
                observations = result["observations"]
                entry["completed"] = sum(
                    o["error"] is None and o["fragment_status"] == "completed" for o in observations
                )
        except (TimeoutError, RuntimeError, DeadlineExceeded) as exc:  # the waves so far count
            error = str(exc)[:3000]
        finally:
            crowd.close()
    span = out[-1]["generations"] - out[0]["generations"] if out else 0
    per_1000 = (out[-1]["rss_kb"] - out[0]["rss_kb"]) / span * 1000 if span else None
    return {
        "waves": out,
        "per_1000_kb": per_1000,
        "second_half_per_1000_kb": _slope_per_1000(out[len(out) // 2 :]),
        "server_environment": environment,
        "error": error,
    }


def _slope_per_1000(waves: list[dict[str, Any]]) -> float | None:
    """RSS growth per 1,000 generations over `waves`, least squares: whether it has levelled off,
    which one wave's RSS against another's cannot tell (a wave's RSS varies by several MB)."""
    if len(waves) < 2:
        return None
    xs: list[float] = [w["generations"] for w in waves]
    ys: list[float] = [w["rss_kb"] for w in waves]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread * 1000


def _memory(stack: Stack, client: httpx.Client, *, trim: bool) -> dict[str, Any]:
    """Where the server's memory is (`memory`): its own account after a full collection (not
    with `--plain`), then its RSS again and by kind of mapping. With `trim`, after the
    allocator has given back its free pages too (`rss_after_trim_kb`)."""
    found: dict[str, Any] = {}
    if not stack.plain:
        with contextlib.suppress(httpx.HTTPError):
            found["server"] = client.get(stack.base_url + memory.PATH).json()
        found["rss_after_gc_kb"] = proc_status_kb(stack.server_pid, "VmRSS")
        if trim:
            with contextlib.suppress(httpx.HTTPError):
                client.get(stack.base_url + memory.PATH, params={"trim": "1"})
            found["rss_after_trim_kb"] = proc_status_kb(stack.server_pid, "VmRSS")
    found["threads"] = proc_status_kb(stack.server_pid, "Threads")
    with contextlib.suppress(OSError):
        found["rss_by_mapping_kb"] = memory.rss_by_mapping(stack.server_pid)
    return found


def passes(summary: dict[str, Any], limit_ms: float) -> bool:
    added, gap = summary["ttft_added_ms"]["p99"], summary["gap_ms"]["p99"]
    return (
        summary["completed"] == summary["streams"]
        and added is not None
        and gap is not None
        and added <= limit_ms
        and gap <= limit_ms
    )


def search_ceiling(
    settings: Settings, start: int, most: int, limit_ms: float, deadline: Deadline
) -> tuple[list[dict[str, Any]], int | None, int | None]:
    """From `start`, double while levels pass (up to `most`) or halve while they fail (down to
    1), then bisect a few times to within about 10 %: the levels run, the highest passing and the
    lowest failing concurrency (None when not found)."""
    summaries: list[dict[str, Any]] = []
    good: int | None = None
    bad: int | None = None

    def run(level: int) -> bool:
        summaries.append(run_level(settings, level, deadline))
        return passes(summaries[-1], limit_ms)

    try:
        level = start
        while good is None or bad is None:
            if run(level):
                good = level
                if bad is None and level * 2 > most:
                    break
                level = level * 2 if bad is None else level
            else:
                bad = level
                if good is None and level == 1:
                    break
                level = max(1, level // 2) if good is None else level
        for _ in range(3):
            if good is None or bad is None or bad - good <= max(1, good // 10):
                break
            level = (good + bad) // 2
            good, bad = (level, bad) if run(level) else (good, level)
    except DeadlineExceeded:
        pass
    return sorted(summaries, key=lambda s: s["concurrency"]), good, bad
