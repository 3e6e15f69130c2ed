"""Counting the server's database statements, for the load benchmark's write figures.

`install` (a `connection_created` receiver) puts `count` on every connection of the server
process as an `execute_wrapper`, so it sees each statement Django runs, including the
`BEGIN IMMEDIATE` an atomic block opens with on SQLite; commits go to the driver directly and are
not seen. A write transaction is counted at its first write: once per atomic block, or once per
statement outside one (autocommit).

`partial_flush_ids` recognises the worker's periodic flush by its shape (an UPDATE of
`chatapp_generation` that sets `last_seq` and is not a whole-row `save()`) and reads the
generation ids from its parameters: the one place to adjust when the flush changes shape.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})
_GENERATION_UPDATE = 'UPDATE "chatapp_generation" SET '
_ID_EQUALS = '"chatapp_generation"."id" = %s'  # the ORM's, and the writer's (`executemany`)
_ID_IN = '"chatapp_generation"."id" IN ('


def partial_flush_ids(sql: str, params: Sequence[Any] | None) -> list[int]:
    if not sql.startswith(_GENERATION_UPDATE) or not params:
        return []
    where = sql.find(" WHERE ")
    assignments = sql[len(_GENERATION_UPDATE) : where]
    if where < 0 or '"last_seq"' not in assignments or '"message_id"' in assignments:
        return []
    position = sql.find(_ID_EQUALS, where)
    if position >= 0:
        return [int(params[sql.count("%s", 0, position)])]
    position = sql.find(_ID_IN, where)
    if position >= 0:
        first = sql.count("%s", 0, position)
        many = sql.count("%s", position, sql.find(")", position))
        return [int(value) for value in params[first : first + many]]
    return []


def _table(sql: str) -> str:
    """The table an INSERT/UPDATE/DELETE names (Django quotes it)."""
    start = sql.find('"')
    end = sql.find('"', start + 1)
    return sql[start + 1 : end] if 0 <= start < end else "?"


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.statements = 0
        self.writes = 0
        self.transactions = 0
        self.write_transactions = 0
        self.seconds = 0.0
        self.by_write: Counter[str] = Counter()
        self.partial_flushes: Counter[int] = Counter()

    def record(self, connection: Any, sql: str, params: Any, seconds: float, many: bool) -> None:
        kind = sql[: sql.find(" ")].upper() if " " in sql else sql.upper()
        flushed: list[int] = []
        if kind == "UPDATE":  # `executemany`: a list of parameter rows, one generation each
            for row in params if many else [params]:
                flushed += partial_flush_ids(sql, row)
        with self._lock:
            self.statements += 1
            self.seconds += seconds
            if kind == "BEGIN":
                self.transactions += 1
                connection._bench_wrote = False
            elif kind in WRITES:
                self.writes += 1
                self.by_write[f"{kind} {_table(sql)}"] += 1
                if not connection.in_atomic_block:
                    self.write_transactions += 1
                elif not getattr(connection, "_bench_wrote", False):
                    connection._bench_wrote = True
                    self.write_transactions += 1
                for generation in flushed:
                    self.partial_flushes[generation] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "t": time.time(),
                "statements": self.statements,
                "writes": self.writes,
                "transactions": self.transactions,
                "write_transactions": self.write_transactions,
                "seconds": self.seconds,
                "by_write": dict(self.by_write),
                "partial_flushes": {str(k): v for k, v in self.partial_flushes.items()},
            }


COUNTERS = Counters()


def count(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        COUNTERS.record(context["connection"], sql, params, time.perf_counter() - started, many)


def install(sender: Any, connection: Any, **kwargs: Any) -> None:
    # The wrapper list belongs to the connection handler, which outlives each DB-API connection.
    if count not in connection.execute_wrappers:
        connection.execute_wrappers.append(count)
