"""`chatapp/patches/sqlite_backend`: Django's SQLite backend on sqlean's driver with sqlite-vec
loaded, and canaries pinning the pieces of Django's backend it restates or reuses."""

from __future__ import annotations

import datetime
import inspect
from decimal import Decimal

import pytest
import sqlean
from django.conf import settings
from django.db import OperationalError, connection
from django.db.backends.sqlite3 import base as django_sqlite

from chatapp.knowledge.models import Collection
from chatapp.patches.sqlite_backend import base

pytestmark = pytest.mark.django_db


def test_sqlite_urls_run_on_the_backend() -> None:
    assert settings.DATABASES["default"]["ENGINE"] == "chatapp.patches.sqlite_backend"
    connection.ensure_connection()
    assert isinstance(connection.connection, sqlean.Connection)


def test_every_connection_has_sqlite_vec_and_fts5() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT vec_version()")
        assert cursor.fetchone()[0].startswith("v")
        cursor.execute("SELECT vec_distance_l2(vec_f32(%s), vec_f32(%s))", ["[0, 0]", "[3, 4]"])
        assert cursor.fetchone()[0] == pytest.approx(5.0)
        cursor.execute("CREATE VIRTUAL TABLE temp.words USING fts5(text)")
        cursor.execute("INSERT INTO temp.words(text) VALUES (%s)", ["the quick brown fox"])
        cursor.execute("SELECT count(*) FROM temp.words WHERE words MATCH %s", ["quick"])
        assert cursor.fetchone()[0] == 1


def test_sql_cannot_load_extensions() -> None:
    """Loading is on only while sqlite-vec loads: a query that reaches SQL cannot load a file."""
    with pytest.raises(OperationalError, match="not authorized"), connection.cursor() as cursor:
        cursor.execute("SELECT load_extension('/nonexistent')")


def test_values_round_trip_through_the_orm(alice: object) -> None:
    collection = Collection.objects.create(owner=alice, name="Handbook")
    stored = Collection.objects.get(pk=collection.pk)
    assert isinstance(stored.created_at, datetime.datetime)
    assert stored.created_at == collection.created_at
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %(a)s, %(b)s, 1 = 1, '100%%'",
            {"a": Decimal("1.25"), "b": datetime.date(2026, 1, 2)},
        )
        assert cursor.fetchone() == ("1.25", "2026-01-02", 1, "100%")
        cursor.execute("CREATE TEMP TABLE numbers (n integer)")
        cursor.executemany("INSERT INTO numbers VALUES (%s)", [(1,), (2,)])
        cursor.executemany("INSERT INTO numbers VALUES (%(n)s)", [{"n": 3}])
        cursor.execute("SELECT sum(n) FROM numbers")
        assert cursor.fetchone() == (6,)


def test_canary_django_backend_pieces_we_reuse() -> None:
    """The cursor wrapper we restate is still these three methods, and the module-level helpers
    we register and call still exist: an upgrade that changes them fails here."""
    own = {
        name
        for name, value in vars(django_sqlite.SQLiteCursorWrapper).items()
        if inspect.isfunction(value)
    }
    assert own == {"execute", "executemany", "convert_query"}
    assert callable(django_sqlite.decoder)
    assert callable(django_sqlite.adapt_date)
    assert callable(django_sqlite.adapt_datetime)
    assert callable(django_sqlite.register_functions)
    assert django_sqlite.FORMAT_QMARK_REGEX.sub("?", "%s, %%s") == "?, %%s"
    source = inspect.getsource(django_sqlite.DatabaseWrapper.get_new_connection)
    for step in ("register_functions(conn)", "foreign_keys = ON", "legacy_alter_table = OFF"):
        assert step in source
    assert base.DatabaseWrapper.Database is sqlean.dbapi2
    assert connection.features.max_query_params == 250000  # sqlean's build, not the default
