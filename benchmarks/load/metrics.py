"""From raw observations to the figures of one level. Pure functions: no I/O, no clocks.

Joins three views of each answer by its generation: what the tab saw (`Observation`), what the
emulator recorded (by the upstream id the database stores) and what the database holds at the
end. Percentiles are nearest-rank over all streams (p99 of 50 streams is the worst one).
The steady state is read from the emulator's side: the window in which at least 90 % of the
level's peak number of upstream streams are open; the database rates are taken between the
counter samples inside it, per generation divided by the mean number of streams open there.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .sampler import Samples


def pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000


@dataclass(frozen=True, slots=True)
class Probe:
    """The server, its neighbours and the machine at one instant (the round's start or end)."""

    at: float
    rss_kb: int | None
    hwm_kb: int | None
    cpu: dict[str, float | None]  # seconds per process name
    machine_busy_s: float  # all CPUs, from /proc/stat
    counters: dict[str, Any] | None


def _rate(samples: list[dict[str, Any]], key: str, start: float, end: float) -> float | None:
    inside = [s for s in samples if start <= s["t"] <= end]
    if len(inside) < 2 or inside[-1]["t"] - inside[0]["t"] < 0.5 or inside[0][key] is None:
        return None  # None: not counted (transactions on PostgreSQL, `sampler.TRANSACTION_KEYS`)
    change: float = inside[-1][key] - inside[0][key]
    span: float = inside[-1]["t"] - inside[0]["t"]
    return change / span


STEADY_SHARE = 0.9
GRID_S = 0.1


def _steady(spans: list[tuple[float, float]]) -> tuple[int, float, float, float] | None:
    """(peak streaming, window start, window end, mean streaming in it), from each answer's
    upstream stream (the emulator's record, request to end) on a 0.1 s grid."""
    if not spans:
        return None
    first = min(start for start, _ in spans)
    last = max(end for _, end in spans)
    grid = [first + i * GRID_S for i in range(int((last - first) / GRID_S) + 1)]
    counts = [(t, sum(start <= t < end for start, end in spans)) for t in grid]
    peak = max(n for _, n in counts)
    inside = [t for t, n in counts if peak and n >= STEADY_SHARE * peak]
    if not inside:
        return None
    during = [n for t, n in counts if inside[0] <= t <= inside[-1]]
    return peak, inside[0], inside[-1], sum(during) / len(during)


MIN_STREAMING_S = 1.0


def _streaming_cpu_per_token(
    records: list[dict[str, Any]], cpu: list[tuple[float, float]], idle_per_s: float | None
) -> tuple[float | None, float]:
    """The server's CPU per token while every answer streams and nothing else happens: from the
    last upstream request (every send handled) to the first stream's end (no final render yet);
    (µs per token, the window's seconds), the processes' idle CPU (`idle_per_s`) subtracted.
    The tokens in the window are each stream's share of its paced tokens; None when the window
    (within the CPU samples) is under `MIN_STREAMING_S` (sends outlasting a stream: a longer
    `--tokens` opens it)."""
    timed = [r for r in records if r["first_token_at"] and r["finished_at"] and r["tokens"]]
    if not timed or len(cpu) < 2:
        return None, 0.0
    start = max(max(r["created_at"] for r in records), cpu[0][0])
    end = min(min(r["finished_at"] for r in timed), cpu[-1][0])
    if end - start < MIN_STREAMING_S:
        return None, max(0.0, end - start)
    tokens = 0.0
    for r in timed:
        paced = r["finished_at"] - r["first_token_at"]
        overlap = min(end, r["finished_at"]) - max(start, r["first_token_at"])
        if paced > 0 and overlap > 0:
            tokens += r["tokens"] * overlap / paced
    used = _at(cpu, end) - _at(cpu, start) - (idle_per_s or 0.0) * (end - start)
    return (used / tokens * 1e6 if tokens else None), end - start


def _at(samples: list[tuple[float, float]], t: float) -> float:
    """The sampled counter at `t`, interpolated between the samples around it."""
    i = bisect.bisect_left(samples, (t, -math.inf))
    if i == 0:
        return samples[0][1]
    if i == len(samples):
        return samples[-1][1]
    (t0, v0), (t1, v1) = samples[i - 1], samples[i]
    return v0 + (v1 - v0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0)


def _disk_lags(obs: list[dict[str, Any]], samples: Samples) -> list[float]:
    """Per generation, the worst time between text reaching the browser and being committed."""
    worst: list[float] = []
    for o in obs:
        if not o["seq_times"]:
            continue
        seqs = [seq for seq, _ in o["seq_times"]]
        times = [t for _, t in o["seq_times"]]
        lag = 0.0
        for read_at, rows in samples.disk:
            row = rows.get(o["generation"])
            if row is None or row[1] != "streaming":
                continue
            i = bisect.bisect_right(seqs, row[0])  # the first text the disk does not have yet
            if i < len(times) and times[i] <= read_at:
                lag = max(lag, read_at - times[i])
        worst.append(lag)
    return worst


def _first_difference(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _stream_row(
    o: dict[str, Any], row: dict[str, Any], record: dict[str, Any] | None, ok: bool
) -> dict[str, Any]:
    """One stream's times in ms from the start of its POST, for the JSON (None when absent)."""

    def since(t: float | None) -> float | None:
        return None if t is None else round((t - o["post_start"]) * 1000, 1)

    times = o["text_times"]
    return {
        "generation": o["generation"],
        "ok": ok,
        "error": o["error"],
        "post": since(o["post_end"]),
        "page": since(o["page_at"]),
        "socket": since(o["socket_open_at"]),
        "first_text": since(o["first_text_at"]),
        "upstream_request": since(record["created_at"]) if record else None,
        "upstream_first_token": since(record["first_token_at"]) if record else None,
        "done": since(o["done_at"]),
        "fragment": since(o["fragment_at"]),
        "max_gap": round(max((b - a for a, b in itertools.pairwise(times)), default=0) * 1000, 1),
        "messages": o["messages"],
        "wire_bytes": o["wire_bytes"],
        "stored_chars": len(row.get("content") or ""),
    }


def summarize(
    concurrency: int,
    observations: list[dict[str, Any]],
    records: dict[str, dict[str, Any]],
    db_rows: dict[int, dict[str, Any]],
    samples: Samples,
    start: Probe,
    end: Probe,
    crowd: dict[str, Any],
    tokens_per_second: float,
    cpus: int,
) -> dict[str, Any]:
    problems: list[str] = []
    ttft: list[float] = []
    own: list[float] = []
    added: list[float] = []
    to_upstream: list[float] = []
    relay: list[float] = []
    post: list[float] = []
    socket: list[float] = []
    gaps: list[float] = []
    via_page = completed = text_ok = prefix_only = answer_bytes = wire = 0
    overruns: list[float] = []
    live: list[dict[str, Any]] = []
    streams: list[dict[str, Any]] = []
    spans: list[tuple[float, float]] = []
    for o in observations:
        row = db_rows.get(o["generation"] or -1, {})
        record = records.get(row.get("upstream_id") or "")
        ok = (
            o["error"] is None
            and o["done_status"] == o["fragment_status"] == row.get("status") == "completed"
        )
        completed += ok
        stored = row.get("content") or ""
        text = o["text"]
        text_ok += text == stored
        if not ok:
            status = (o["done_status"], o["fragment_status"], row.get("status"))
            problems.insert(0, f"generation {o['generation']}: {o['error'] or status}")
        elif text != stored:
            if text is None or stored.startswith(text):
                prefix_only += 1  # ended before the socket (or the page) caught up
            else:
                problems.append(
                    f"generation {o['generation']}: text {len(text)} chars, stored "
                    f"{len(stored)}, differ at {_first_difference(text, stored)}"
                )
        streams.append(_stream_row(o, row, record, ok))
        if record:
            spans.append((record["created_at"], record["finished_at"] or end.at))
        if o["post_end"]:
            post.append(o["post_end"] - o["post_start"])
        if o["socket_open_at"]:
            socket.append(o["socket_open_at"] - o["post_start"])
        gaps.extend(b - a for a, b in itertools.pairwise(o["text_times"]))
        if o["first_text_at"] is None:
            continue
        live.append(o)
        via_page += o["first_text_via"] == "page"
        ttft.append(o["first_text_at"] - o["post_start"])
        if record and record["first_token_at"]:
            own.append(record["first_token_at"] - record["created_at"])
            added.append(ttft[-1] - own[-1])
            to_upstream.append(record["created_at"] - o["post_start"])
            relay.append(o["first_text_at"] - record["first_token_at"])
            if record["finished_at"]:
                expected = record["tokens"] / tokens_per_second
                overruns.append(record["finished_at"] - record["first_token_at"] - expected)
        if ok and row.get("content"):
            answer_bytes += len(row["content"].encode())
            wire += o["wire_bytes"]
    steady = _steady(spans)
    rates: dict[str, float | None] = {}
    for key in ("write_transactions", "writes", "statements", "seconds", "transactions"):
        rates[key] = _rate(samples.counters, key, steady[1], steady[2]) if steady else None
    flushes_by_id = end.counters["partial_flushes"] if end.counters else None
    flushes = [flushes_by_id.get(str(o["generation"]), 0) for o in live] if flushes_by_id else []
    lags = _disk_lags(live, samples)
    wall = end.at - start.at
    cpu = {
        name: None if first is None or last is None else (last - first) / wall * 100
        for (name, first), last in zip(start.cpu.items(), end.cpu.values(), strict=True)
    }
    # "server-1", "server-2"...: each Daphne process of a cluster, already summed in "server".
    ours = sum(
        (end.cpu[n] or 0) - (f or 0) for n, f in start.cpu.items() if not n.startswith("server-")
    )
    # Every token the emulator sent for this level's answers: the server's CPU over the round
    # (sends, streams, fragments) divided by it, and the same for its neighbours.
    tokens = sum(
        records[r["upstream_id"]]["tokens"] or 0
        for r in db_rows.values()
        if r.get("upstream_id") in records
    )
    cpu_per_token = {
        name: None
        if first is None or end.cpu[name] is None or not tokens
        else ((end.cpu[name] or 0) - first) / tokens * 1e6
        for name, first in start.cpu.items()
    }
    ours_records = [
        records[r["upstream_id"]] for r in db_rows.values() if r.get("upstream_id") in records
    ]
    streaming_us, streaming_s = _streaming_cpu_per_token(
        ours_records, samples.cpu, samples.idle_cpu_per_s
    )
    others = max(0.0, (end.machine_busy_s - start.machine_busy_s - ours) / (wall * cpus) * 100)
    peak = max((kb for t, kb in samples.rss if start.at <= t <= end.at), default=None)
    grown = peak - start.rss_kb if peak is not None and start.rss_kb is not None else None
    write_tx = rates["write_transactions"]
    return {
        "concurrency": concurrency,
        "streams": len(observations),
        "completed": completed,
        "text_ok": text_ok,
        "text_prefix_only": prefix_only,
        "ttft_ms": {"p50": _ms(pct(ttft, 50)), "p99": _ms(pct(ttft, 99))},
        "emulator_ttft_ms": {"p50": _ms(pct(own, 50)), "p99": _ms(pct(own, 99))},
        "ttft_added_ms": {
            "p50": _ms(pct(added, 50)),
            "p99": _ms(pct(added, 99)),
            "max": _ms(max(added, default=None)),
        },
        "to_upstream_ms": {"p50": _ms(pct(to_upstream, 50)), "p99": _ms(pct(to_upstream, 99))},
        "relay_ms": {"p50": _ms(pct(relay, 50)), "p99": _ms(pct(relay, 99))},
        "first_text_via_page": via_page,
        "post_ms": {"p50": _ms(pct(post, 50)), "p99": _ms(pct(post, 99))},
        "socket_open_ms": {"p50": _ms(pct(socket, 50)), "p99": _ms(pct(socket, 99))},
        "gap_ms": {
            "p50": _ms(pct(gaps, 50)),
            "p99": _ms(pct(gaps, 99)),
            "max": _ms(max(gaps, default=None)),
        },
        "messages_per_answer": sum(o["messages"] for o in observations) / max(1, len(observations)),
        "recoveries": {
            key: sum(o[key] for o in observations)
            for key in ("snapshot_requests", "held", "duplicates", "reconnects", "updated")
        },
        "peak_streaming": steady[0] if steady else None,
        "steady_s": steady[2] - steady[1] if steady else None,
        "steady_mean_streaming": steady[3] if steady else None,
        "db_per_s": rates,
        "write_tx_per_generation_s": write_tx / steady[3]
        if write_tx is not None and steady
        else None,
        "partial_flushes": {
            "p50": pct(flushes, 50),
            "min": min(flushes, default=None),
            "max": max(flushes, default=None),
        },
        "disk_lag_ms": {"p99": _ms(pct(lags, 99)), "max": _ms(max(lags, default=None))},
        "rss_kb": {"before": start.rss_kb, "peak": peak, "hwm": end.hwm_kb},
        "rss_per_stream_kb": grown / concurrency if grown is not None else None,
        "wire_per_answer_byte": wire / answer_bytes if answer_bytes else None,
        "cpu_percent": cpu,
        "streamed_tokens": tokens,
        "cpu_us_per_token": cpu_per_token,
        "streaming_cpu_us_per_token": streaming_us,
        "streaming_window_s": streaming_s,
        "server_idle_cpu_percent": None
        if samples.idle_cpu_per_s is None
        else samples.idle_cpu_per_s * 100,
        "others_cpu_percent": others,
        "crowd_self_cpu_percent": crowd["cpu_seconds"] / wall * 100,
        "crowd_lag_ms": {key: _ms(crowd["loop_lag"][key]) for key in ("p99", "max")},
        "emulator_overrun_ms": {"p99": _ms(pct(overruns, 99))},
        "problems": problems[:10],
        "streams_detail": streams,
    }
