"""The orchestrator's reads of a level's database: the SQLite file, or PostgreSQL by its URL.

A level's database is named by a `Path` (one process: SQLite, opened read-only, so "on disk"
means committed) or by a `postgres://` URL (`--processes N`: the cluster's PostgreSQL, read with
psycopg in autocommit, so each read sees what was committed by then). The queries are the same
text on both; only the parameter placeholder differs.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import psycopg

Target = Path | str
ERRORS = (sqlite3.Error, psycopg.Error)


def open_db(target: Target) -> Any:
    if isinstance(target, Path):
        return sqlite3.connect(
            f"file:{target}?mode=ro",
            uri=True,
            timeout=5,
            isolation_level=None,
            check_same_thread=False,
        )
    return psycopg.connect(target, autocommit=True)


def _placeholder(connection: Any) -> str:
    return "?" if isinstance(connection, sqlite3.Connection) else "%s"


def read_disk(connection: Any, after: int) -> dict[int, tuple[int, str]]:
    where = f"WHERE id > {_placeholder(connection)}"
    rows = connection.execute(
        f"SELECT id, last_seq, status FROM chatapp_generation {where}", (after,)
    )
    return {pk: (seq, status) for pk, seq, status in rows}


def max_generation(target: Target) -> int:
    with contextlib.closing(open_db(target)) as connection:
        row = connection.execute("SELECT COALESCE(MAX(id), 0) FROM chatapp_generation").fetchone()
        return int(row[0])


def final_rows(target: Target, after: int) -> dict[int, dict[str, Any]]:
    with contextlib.closing(open_db(target)) as connection:
        cursor = connection.execute(
            "SELECT g.id, g.status, g.upstream_id, g.last_seq, m.content FROM chatapp_generation g"
            " JOIN chatapp_message m ON m.id = g.message_id"
            f" WHERE g.id > {_placeholder(connection)}",
            (after,),
        )
        names = [column[0] for column in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor}
