"""The PostgreSQL store's pipelined writes (``storage/postgres/pipelined.py``): statements queued
behind each other, a batch read back in one round trip, and the failures that surface later than
the statement that met them: nothing of the transaction stays, the connection comes back clean,
and a staged upload's commit step runs again with its staged rows kept."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from tabulae.model.errors import ServiceError
from tabulae.storage.plan import Plan, Restart, Sql, batch
from tabulae.storage.postgres.engine import PostgresDatabase


@asynccontextmanager
async def probe(url: str) -> AsyncIterator[tuple[PostgresDatabase, str]]:
    """A database handle and a table of this test's own, dropped after."""
    table = f"pipelined_probe_{uuid.uuid4().hex[:10]}"
    db = await PostgresDatabase.open(url, max_size=2)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
        await admin.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v text NOT NULL)")  # type: ignore[arg-type]
        try:
            yield db, table
        finally:
            await db.close()
            await admin.execute(f"DROP TABLE {table}")  # type: ignore[arg-type]


async def keys(url: str, table: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(f"SELECT k FROM {table} ORDER BY k")  # type: ignore[arg-type]
        return [row[0] for row in await cursor.fetchall()]


def test_a_queued_statement_that_fails_leaves_nothing(pg_url: str) -> None:
    async def main() -> None:
        async with probe(pg_url) as (db, table):
            insert = f"INSERT INTO {table} (k, v) VALUES (:k, 'x')"

            def clash() -> Plan[str]:
                yield Sql(insert, {"k": 1})
                yield Sql(insert, {"k": 1})  # a duplicate key, queued: it surfaces at the COMMIT's Sync
                yield Sql(insert, {"k": 2})
                return "committed"

            with pytest.raises(ServiceError):
                await db.run_plan(clash, retry=True, transaction=True, pipeline=True)
            assert await keys(pg_url, table) == []

            def read_after_clash() -> Plan[Any]:
                yield Sql(insert, {"k": 3})
                yield Sql(insert, {"k": 3})  # fails; the read after it reports it
                return (yield Sql(f"SELECT count(*) FROM {table}", fetch="one"))

            with pytest.raises(ServiceError):
                await db.run_plan(read_after_clash, retry=True, transaction=True, pipeline=True)

            def good() -> Plan[list[Any]]:
                yield Sql(insert, {"k": 4})
                yield Sql(insert, {"k": 5})
                replies = yield batch(
                    Sql(f"SELECT count(*) FROM {table}", fetch="one"),
                    Sql(f"UPDATE {table} SET v = 'y' WHERE k = 5"),
                    Sql(f"SELECT k, v FROM {table} ORDER BY k", fetch="all"),
                )
                return list(replies)

            # the connections came back clean: the next transaction runs and sees only its rows
            count, updated, rows = await db.run_plan(good, retry=True, transaction=True, pipeline=True)
            assert count == (2,) and updated is None and [tuple(r) for r in rows] == [(4, "x"), (5, "y")]
            assert await keys(pg_url, table) == [4, 5]

    asyncio.run(main())


def test_a_commit_step_runs_again_with_its_staged_rows(pg_url: str) -> None:
    async def main() -> None:
        async with probe(pg_url) as (db, table):
            insert = f"INSERT INTO {table} (k, v) VALUES (:k, 'x')"
            conn = await db.take()
            await conn.execute("BEGIN")
            await conn.execute(f"INSERT INTO {table} (k, v) VALUES (10, 'staged')")  # type: ignore[arg-type]
            tries: list[int] = []

            def step() -> Plan[int]:
                tries.append(1)
                yield Sql(insert, {"k": 11})
                if len(tries) == 1:
                    raise Restart  # as a write that met a concurrent creation does
                row = yield Sql(f"SELECT count(*) FROM {table}", fetch="one")
                return int(row[0])

            assert await db.commit_in(conn, step) == 2
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            await db.give_back(conn)
            assert len(tries) == 2 and await keys(pg_url, table) == [10, 11]

            conn = await db.take()
            await conn.execute("BEGIN")
            await conn.execute(f"INSERT INTO {table} (k, v) VALUES (20, 'staged')")  # type: ignore[arg-type]

            def clash() -> Plan[None]:
                yield Sql(insert, {"k": 10})  # a duplicate key, queued
                yield Sql(insert, {"k": 21})

            with pytest.raises(ServiceError):
                await db.commit_in(conn, clash)
            # back at the savepoint: the staged row is still there, the caller rolls back
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            cursor = await conn.execute(f"SELECT k FROM {table} WHERE k >= 20")  # type: ignore[arg-type]
            assert await cursor.fetchall() == [(20,)]
            await conn.execute("ROLLBACK")
            await db.give_back(conn)
            assert await keys(pg_url, table) == [10, 11]

    asyncio.run(main())
