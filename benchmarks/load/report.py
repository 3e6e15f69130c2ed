"""The load benchmark's output: one table (rows are metrics, columns levels) and a JSON file.

Each row is a label and a function of one level's summary (`metrics.summarize`), so a new figure
is one line here. Absent values (a window too short to measure, `--plain` without counters)
print as "-", never as zero.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

Summary = dict[str, Any]


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pair(key: str, a: str = "p50", b: str = "p99", digits: int = 0) -> Callable[[Summary], str]:
    return lambda s: f"{_n(s[key][a], digits)} / {_n(s[key][b], digits)}"


def _db(key: str, scale: float = 1, digits: int = 0) -> Callable[[Summary], str]:
    def cell(s: Summary) -> str:
        value = s["db_per_s"][key]
        return _n(None if value is None else value * scale, digits)

    return cell


def _mb(kb: float | None) -> str:
    return _n(None if kb is None else kb / 1024, 1)


def _cpu(s: Summary) -> str:
    cpu = s["cpu_percent"]
    return " / ".join(_n(cpu.get(name)) for name in ("server", "emulator", "crowd"))


def _cpu_per_token(s: Summary) -> str:
    cpu = s["cpu_us_per_token"]
    return " / ".join(_n(cpu.get(name), 1) for name in ("server", "emulator", "crowd"))


def _streaming_cpu(s: Summary) -> str:
    return f"{_n(s['streaming_cpu_us_per_token'], 1)} ({_n(s['streaming_window_s'], 1)} s)"


def _flushes(s: Summary) -> str:
    f = s["partial_flushes"]
    return f"{_n(f['p50'])} ({_n(f['min'])}-{_n(f['max'])})"


def _recoveries(s: Summary) -> str:
    r = s["recoveries"]
    return f"{r['snapshot_requests']} / {r['held']} / {r['duplicates']} / {r['reconnects']}"


ROWS: list[tuple[str, Callable[[Summary], str]]] = [
    ("streams completed", lambda s: f"{s['completed']}/{s['streams']}"),
    ("streamed text == stored text", lambda s: f"{s['text_ok']}/{s['streams']}"),
    ("  ended before the socket caught up", lambda s: str(s["text_prefix_only"])),
    ("peak answers streaming at once (upstream)", lambda s: _n(s["peak_streaming"])),
    ("TTFT at the browser p50 / p99 (ms)", _pair("ttft_ms")),
    ("  emulator's own first token p50 / p99 (ms)", _pair("emulator_ttft_ms")),
    ("TTFT added by the app p50 / p99 (ms)", _pair("ttft_added_ms")),
    ("  POST -> upstream request p50 / p99 (ms)", _pair("to_upstream_ms")),
    ("  upstream token -> browser p50 / p99 (ms)", _pair("relay_ms")),
    ("  first text already in the page", lambda s: f"{s['first_text_via_page']}/{s['streams']}"),
    ("send POST answered p50 / p99 (ms)", _pair("post_ms")),
    ("socket open after POST p50 / p99 (ms)", _pair("socket_open_ms")),
    ("gap between deltas p50 / p99 (ms)", _pair("gap_ms")),
    ("  worst gap (ms)", lambda s: _n(s["gap_ms"]["max"])),
    ("socket messages per answer", lambda s: _n(s["messages_per_answer"], 1)),
    ("snapshot asks / held / dups / reconnects", _recoveries),
    ("steady state, >= 90% of peak streaming (s)", lambda s: _n(s["steady_s"], 1)),
    ("DB write transactions / s", _db("write_transactions")),
    ("DB write statements / s", _db("writes")),
    ("DB statements / s (all)", _db("statements")),
    ("DB time in statements (ms / s)", _db("seconds", 1000)),
    ("write transactions / generation / s", lambda s: _n(s["write_tx_per_generation_s"], 2)),
    ("partial flushes / generation p50 (min-max)", _flushes),
    ("text on disk behind browser p99 / max (ms)", _pair("disk_lag_ms", "p99", "max")),
    (
        "server RSS before / peak (MB)",
        lambda s: f"{_mb(s['rss_kb']['before'])} / {_mb(s['rss_kb']['peak'])}",
    ),
    ("server RSS growth per stream (kB)", lambda s: _n(s["rss_per_stream_kb"], 1)),
    ("socket bytes per answer byte", lambda s: _n(s["wire_per_answer_byte"], 2)),
    ("CPU % of a core: server / emulator / crowd", _cpu),
    ("CPU per streamed token (us): server / emulator / crowd", _cpu_per_token),
    ("  server's while all stream, no sends, idle off (us; window)", _streaming_cpu),
    (
        "CPU % of the machine, others: before / during",
        lambda s: f"{_n(s['others_cpu_percent_before'])} / {_n(s['others_cpu_percent'])}",
    ),
    ("crowd loop lag p99 / max (ms)", _pair("crowd_lag_ms", "p99", "max")),
    ("emulator stream overrun p99 (ms)", lambda s: _n(s["emulator_overrun_ms"]["p99"])),
]


def table(summaries: list[Summary]) -> str:
    header = ["concurrency", *(str(s["concurrency"]) for s in summaries)]
    rows = [header] + [[label, *(cell(s) for s in summaries)] for label, cell in ROWS]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for number, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


GROWTH_COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], object]], ...] = (
    ("generations", lambda w: f"{w['generations']:,}"),
    ("completed", lambda w: w.get("completed", "-")),
    ("RSS MB", lambda w: _mb(w["rss_kb"])),
    ("after gc", lambda w: _mb(w.get("rss_after_gc_kb"))),
    ("arena heaps", lambda w: _mb(w.get("rss_by_mapping_kb", {}).get("arena_heaps"))),
    ("malloc in use", lambda w: _mb((w.get("server", {}).get("malloc_kb") or {}).get("in_use"))),
    ("malloc free", lambda w: _mb((w.get("server", {}).get("malloc_kb") or {}).get("free"))),
    ("objects", lambda w: _n(w.get("server", {}).get("gc_objects"))),
    ("threads", lambda w: _n(w.get("threads"))),
    ("load", lambda w: _n(w.get("loadavg"), 1)),
)


def growth_table(growth: dict[str, Any]) -> str:
    """A row per wave: RSS, where it is (`memory`), and the machine's 1-minute load average."""
    rows = [[name for name, _ in GROWTH_COLUMNS]]
    rows += [[str(cell(wave)) for _, cell in GROWTH_COLUMNS] for wave in growth["waves"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(GROWTH_COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    environment = " ".join(f"{k}={v}" for k, v in growth.get("server_environment", {}).items())
    lines.append(
        f"growth per 1,000 generations after the first wave: {_mb(growth['per_1000_kb'])} MB;"
        f" over the second half of the waves (least squares):"
        f" {_mb(growth.get('second_half_per_1000_kb'))} MB"
    )
    lines.append(f"server's allocator environment: {environment or 'none set'}")
    trimmed = growth["waves"][-1].get("rss_after_trim_kb") if growth["waves"] else None
    if trimmed is not None:
        lines.append(f"RSS after the last wave and malloc_trim(0): {_mb(trimmed)} MB")
    return "\n".join(lines)


def write_json(out_dir: Path, payload: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"load-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    return path
