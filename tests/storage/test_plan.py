"""The plan runner: one plan, written once, runs the same on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid

import psycopg

from tabulae.storage.plan import (
    RENDERED_LIMIT,
    Plan,
    PostgresDialect,
    Sql,
    SqliteDialect,
    run_async,
    run_sync,
)
from tests.backends import database_url


def _counter(table: str, key: str) -> Plan[tuple[int, int]]:
    """Insert two rows, bump one under a lock, count what changed: every fetch kind once."""
    yield Sql(
        f"INSERT INTO {table} ({{key,}} name, n) VALUES ({{:key,}} :name, :n)",
        rows=[{"dkey": 7, "name": key, "n": 1}, {"dkey": 7, "name": key + "%", "n": 5}],
    )
    row = yield Sql(
        f"SELECT n FROM {table} WHERE {{key=}} name = :name {{lock}}", {"dkey": 7, "name": key}, "one"
    )
    changed = yield Sql(
        f"UPDATE {table} SET n = n + :by WHERE {{key=}} name LIKE :name || '%'",
        {"dkey": 7, "name": key, "by": row[0]},
        "rowcount",
    )
    rows = yield Sql(f"SELECT n FROM {table} WHERE {{key=}} name LIKE '%' ORDER BY n", {"dkey": 7}, "all")
    return changed, sum(n for (n,) in rows)


def test_a_plan_runs_on_sqlite() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (name TEXT PRIMARY KEY, n INTEGER)")
    assert run_sync(_counter("t", "a"), conn, SqliteDialect()) == (2, 8)


def test_a_plan_runs_on_postgres() -> None:
    url = database_url("postgres")
    table = "plan_" + uuid.uuid4().hex[:12]

    async def main() -> tuple[int, int]:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await conn.execute(
                f"CREATE TEMP TABLE {table} (dkey INT, name TEXT, n INT, PRIMARY KEY (dkey, name))"
            )
            return await run_async(_counter(table, "a"), conn, PostgresDialect())

    assert asyncio.run(main()) == (2, 8)


def test_postgres_rendering_keeps_casts_and_literal_percent() -> None:
    rendered = PostgresDialect().render("SELECT :a::text, 'x%' WHERE {key=} b = :b {lock}")
    assert rendered == "SELECT %(a)s::text, 'x%%' WHERE dkey = %(dkey)s AND b = %(b)s FOR UPDATE"
    assert SqliteDialect().render("SELECT :a WHERE {key=} b = :b {lock}") == "SELECT :a WHERE  b = :b "


def test_sqlite_runs_positional_parameters_taken_from_the_mapping() -> None:
    dialect = SqliteDialect()
    text, convert = dialect.prepare("SELECT :a, :b, :a WHERE {key=} c = :c")
    assert text == "SELECT ?, ?, ? WHERE  c = ?"
    assert convert is not None and convert({"a": 1, "b": 2, "c": 3, "dkey": 9}) == (1, 2, 1, 3)
    one_text, one = dialect.prepare("SELECT :only")
    assert one_text == "SELECT ?" and one is not None and one({"only": 5}) == (5,)
    conn = sqlite3.connect(":memory:")

    def plan() -> Plan[tuple[int, int]]:
        row = yield Sql("SELECT :x + :y, :x", {"x": 2, "y": 3}, "one")
        none = yield Sql("SELECT 7", fetch="one")
        return row[0] + none[0], row[1]

    assert run_sync(plan(), conn, dialect) == (12, 2)


def test_rendered_texts_are_bounded() -> None:
    """Filtered scans build a text per filter: a dialect keeps a bounded number of renderings."""
    dialect = PostgresDialect()
    for n in range(RENDERED_LIMIT + 10):
        assert dialect.render(f"SELECT :a + {n}") == f"SELECT %(a)s + {n}"
    assert len(dialect._rendered) <= RENDERED_LIMIT
    for n in range(RENDERED_LIMIT + 10):
        dialect.prepare(f"SELECT :a + {n}")
    assert len(dialect.prepared) <= RENDERED_LIMIT
