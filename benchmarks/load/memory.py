"""Where the server's memory is, for the growth check: malloc's own books, Python's, the maps.

RSS alone cannot tell a leak from an allocator that keeps what was freed. After each wave the
orchestrator asks the server (`GET /__bench__/memory`, answered in `instrumented_app` before
Django) for glibc's `mallinfo2()` (bytes malloc has handed out versus bytes it holds free),
Python's live objects after a full collection (their count, the most numerous types, and the
top allocation sites when the server runs under `PYTHONTRACEMALLOC`) and its threads; and it
reads the process's `/proc/PID/smaps` itself (`rss_by_mapping`): glibc's per-thread arena heaps
are anonymous 64 MiB-aligned reservations, the main arena is `[heap]`, and the rest of the
anonymous memory is pymalloc's 1 MiB arenas and large mmapped blocks.

Growth in `in_use` or in the object counts is Python holding on to something; growth in `free`
or in the arena heaps' RSS with neither growing is the allocator keeping freed memory. After the
last wave the server is asked to `trim` as well (`?trim=1`): the RSS that is left is what it
needs.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import gc
import re
import sys
import threading
import tracemalloc
from typing import Any

PATH = "/__bench__/memory"
HEAP_MAX = 64 * 1024 * 1024  # glibc's HEAP_MAX_SIZE on 64-bit: one arena heap's reservation
TOP = 12
ALLOCATOR_VARIABLES = ("MALLOC_", "GLIBC_TUNABLES", "PYTHONMALLOC", "PYTHONTRACEMALLOC")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def malloc_kb() -> dict[str, int] | None:
    """glibc's totals over all arenas (None on another libc): `held` from the system for small
    blocks, `in_use` of it, `free` in it, and `mmapped` large blocks."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return None
    mallinfo2.restype = _Mallinfo2
    info = mallinfo2()
    return {
        "held": info.arena // 1024,
        "in_use": info.uordblks // 1024,
        "free": info.fordblks // 1024,
        "mmapped": info.hblkhd // 1024,
    }


def _kind(thread_name: str) -> str:
    """A thread's name with its numbers as N: `ThreadPoolExecutor-41_0` counts as `-N_N`."""
    return re.sub(r"\d+", "N", thread_name)


def trim() -> None:
    """`malloc_trim(0)`: glibc gives the free pages of every arena back to the system. RSS after
    it is what the process needs; before it, what the allocator keeps as well."""
    with contextlib.suppress(AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def snapshot() -> dict[str, Any]:
    """The server's side of a reading, after a full collection."""
    gc.collect()
    objects = gc.get_objects()
    types = collections.Counter(type(o).__qualname__ for o in objects)
    out: dict[str, Any] = {
        "python_threads": dict(collections.Counter(_kind(t.name) for t in threading.enumerate())),
        "gc_objects": len(objects),
        "allocated_blocks": sys.getallocatedblocks(),
        "top_types": dict(types.most_common(TOP)),
        "malloc_kb": malloc_kb(),
    }
    del objects
    if tracemalloc.is_tracing():
        current, _ = tracemalloc.get_traced_memory()
        stats = tracemalloc.take_snapshot().statistics("lineno")[:TOP]
        out["traced_kb"] = current // 1024
        out["traced_top"] = {str(s.traceback[0]): s.size // 1024 for s in stats}
    return out


def allocator_environment(pid: int) -> dict[str, str]:
    """The variables of `pid`'s environment that change how it allocates."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            entries = environ.read().decode(errors="replace").split("\0")
    except OSError:
        return {}
    pairs = (entry.partition("=") for entry in entries)
    return {name: value for name, _, value in pairs if name.startswith(ALLOCATOR_VARIABLES)}


def rss_by_mapping(pid: int) -> dict[str, int]:
    """The process's RSS in kB by kind of mapping, from /proc/PID/smaps, and how many arena
    heaps it has (a heap grown past 64 MiB continues in another, counted too)."""
    maps: list[tuple[int, int, str, str, int]] = []  # start, end, permissions, name, rss
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields[0].endswith(":"):
                if fields[0] == "Rss:" and maps:
                    maps[-1] = (*maps[-1][:4], int(fields[1]))
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            maps.append((start, end, fields[1], fields[5] if len(fields) > 5 else "", 0))
    out = {"arena_heaps": 0, "arena_heap_count": 0, "main_heap": 0, "other_anon": 0, "files": 0}
    for i, (start, end, perms, name, rss) in enumerate(maps):
        reserved = end
        if i + 1 < len(maps) and maps[i + 1][0] == end and maps[i + 1][2] == "---p":
            reserved = maps[i + 1][1]
        if (
            not name
            and perms.startswith("rw")
            and start % HEAP_MAX == 0
            and reserved - start == HEAP_MAX
        ):
            out["arena_heaps"] += rss
            out["arena_heap_count"] += 1
        elif name == "[heap]":
            out["main_heap"] += rss
        elif not name or name.startswith("["):
            out["other_anon"] += rss
        else:
            out["files"] += rss
    return out
