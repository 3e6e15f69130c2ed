"""Django's SQLite backend on sqlean.py's SQLite, which loads extensions (this CPython's `sqlite3`
was built without `enable_load_extension`) and has FTS5, with `sqlite-vec` loaded into every
connection: the embedded store of knowledge collections (`knowledge/stores/sqlite.py`).

Everything is Django's backend but the driver: `Database` is sqlean's dbapi2, which is the
standard module's code over a newer SQLite, so the same converters and adapters are registered
on it, and the cursor wrapper (Django's `SQLiteCursorWrapper`, which subclasses the standard
module's cursor type) is restated over sqlean's. `settings.DATABASES` names this package for
every sqlite URL. Its canary tests are in `tests/chatapp/patches/test_sqlite_backend.py`.
"""

from __future__ import annotations

import datetime
import decimal
import sqlite3
from collections.abc import Iterable, Mapping
from itertools import tee
from typing import Any

import sqlean
import sqlite_vec
from django.db.backends.sqlite3 import base
from django.db.backends.sqlite3._functions import (  # type: ignore[import-untyped]
    register as register_functions,
)
from django.utils.dateparse import parse_date, parse_datetime, parse_time

Database = sqlean.dbapi2

Database.register_converter("bool", b"1".__eq__)
Database.register_converter("date", base.decoder(parse_date))
Database.register_converter("time", base.decoder(parse_time))
Database.register_converter("datetime", base.decoder(parse_datetime))
Database.register_converter("timestamp", base.decoder(parse_datetime))
Database.register_adapter(decimal.Decimal, str)
Database.register_adapter(datetime.date, base.adapt_date)
Database.register_adapter(datetime.datetime, base.adapt_datetime)


# The limits Django asks `Connection.getlimit` for (by the standard module's constants), which
# sqlean's connection lacks: read off the build's compile options, SQLite's defaults otherwise.
_LIMITS = {
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: ("MAX_VARIABLE_NUMBER", 32766),
    sqlite3.SQLITE_LIMIT_COLUMN: ("MAX_COLUMN", 2000),
}


class Connection(sqlean.Connection):  # type: ignore[misc]
    """sqlean's connection with `getlimit` for the limits Django reads."""

    def getlimit(self, category: int) -> int:
        option, default = _LIMITS[category]
        for (compiled,) in self.execute("PRAGMA compile_options"):
            name, _, value = str(compiled).partition("=")
            if name == option:
                return int(value)
        return default


class CursorWrapper(sqlean.Cursor):  # type: ignore[misc]
    """Django's `SQLiteCursorWrapper` over sqlean's cursor: "format" and "pyformat" parameters
    turned into sqlite's "qmark" and "named"."""

    def execute(self, query: str, params: Any = None) -> Any:
        if params is None:
            return super().execute(query)
        param_names = list(params) if isinstance(params, Mapping) else None
        return super().execute(self.convert_query(query, param_names=param_names), params)

    def executemany(self, query: str, param_list: Iterable[Any]) -> Any:
        peekable, param_list = tee(iter(param_list))
        if (params := next(peekable, None)) and isinstance(params, Mapping):
            param_names: list[str] | None = list(params)
        else:
            param_names = None
        return super().executemany(self.convert_query(query, param_names=param_names), param_list)

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")
        return query % {name: f":{name}" for name in param_names}


class DatabaseWrapper(base.DatabaseWrapper):
    Database = Database

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = Database.connect(**conn_params, factory=Connection)
        # Loading is allowed only for as long as it takes: SQL's load_extension() stays off.
        connection.enable_load_extension(True)
        try:
            sqlite_vec.load(connection)
        finally:
            connection.enable_load_extension(False)
        register_functions(connection)
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA legacy_alter_table = OFF")
        # Set by Django's get_connection_params from the init_command option.
        for init_command in self.init_commands:  # type: ignore[attr-defined]
            if init_command := init_command.strip():
                connection.execute(init_command)
        return connection

    def create_cursor(self, name: str | None = None) -> Any:
        return self.connection.cursor(factory=CursorWrapper)
