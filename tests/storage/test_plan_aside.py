"""Statements a plan sends aside (``tabulae/storage/plan.py``: :func:`aside`, :func:`collect`):
on PostgreSQL they run on another pooled connection while the plan goes on, and come back when
collected; left uncollected they are cancelled and their connection returns to the pool; with no
connection to spare, or on SQLite's one connection, they run there and then. Real databases."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import pytest

from tabulae.storage.plan import Plan, Sql, SqliteDialect, aside, collect, run_sync
from tabulae.storage.postgres import engine, planned
from tabulae.storage.postgres.engine import PostgresDatabase
from tests.backends import database_url
from tests.conftest import fresh_database

_BACKEND = "SELECT pg_backend_pid()"


def _beside() -> Plan[tuple[Any, Any, float]]:
    """Sends a half-second sleep aside, reads its own backend meanwhile, then collects."""
    ticket = yield aside(Sql("SELECT pg_sleep(0.5)"), Sql(_BACKEND, fetch="one"))
    started = time.monotonic()
    own = yield Sql(_BACKEND, fetch="one")
    waited_for_own = time.monotonic() - started
    _, other = yield collect(ticket)
    return own[0], other[0], waited_for_own


def test_on_sqlite_aside_statements_run_at_once_and_are_collected() -> None:
    conn = sqlite3.connect(":memory:")

    def plan() -> Plan[list[Any]]:
        yield Sql("CREATE TABLE t (x)")
        ticket = yield aside(Sql("INSERT INTO t VALUES (1)"), Sql("SELECT count(*) FROM t", fetch="one"))
        yield Sql("INSERT INTO t VALUES (2)")
        return list((yield collect(ticket)))

    assert run_sync(plan(), conn, SqliteDialect()) == [None, (1,)]


def test_on_postgresql_aside_statements_run_on_another_connection_meanwhile() -> None:
    async def body() -> None:
        database = await PostgresDatabase.open(fresh_database(database_url("postgres")), max_size=4)
        try:
            own, other, waited = await planned.read_pipelined(database, _beside)
            assert own != other  # two backends
            assert waited < 0.4  # the plan's own statement did not wait for the sleep aside
        finally:
            await database.close()

    asyncio.run(body())


def test_uncollected_aside_statements_are_cancelled_and_their_connection_returns() -> None:
    def plan() -> Plan[str]:
        yield aside(Sql("SELECT pg_sleep(30)"))
        return "done"

    async def body() -> None:
        database = await PostgresDatabase.open(fresh_database(database_url("postgres")), max_size=2)
        try:
            started = time.monotonic()
            assert await planned.read_pipelined(database, plan) == "done"
            assert time.monotonic() - started < 20  # the sleep was cancelled, not waited out
            # the connection it held serves again (once the pool has reset it), as a spare one
            for _ in range(100):
                own, other, _ = await planned.read_pipelined(database, _beside)
                if own != other:
                    break
                await asyncio.sleep(0.1)
            assert own != other
        finally:
            await database.close()

    asyncio.run(body())


def test_without_a_spare_connection_aside_statements_run_on_the_plans_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def body() -> None:
        database = await PostgresDatabase.open(fresh_database(database_url("postgres")), max_size=1)
        try:
            own, other, waited = await planned.read_pipelined(database, _beside)
            assert own == other  # one connection: the sleep ran first, on it
            assert waited < 0.4  # and was over before the plan's own statement
        finally:
            await database.close()

    monkeypatch.setattr(engine, "SPARE_WAIT", 0.5)
    asyncio.run(body())
