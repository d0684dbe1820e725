"""PostgreSQL runs a plan (:mod:`tabulae.storage.plan`) on a pooled connection: a read as one
idempotent try (again on a fresh connection if the first was lost), a write as one transaction
retried on serialization failures and deadlocks, or statement by statement where it must run
outside a transaction (``CREATE``/``DROP INDEX CONCURRENTLY``). Rows come back in binary format,
so ``bytea`` is not hex-encoded on the wire."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tabulae.storage.plan import Plan, PostgresDialect, Sql, batched, run_async
from tabulae.storage.postgres.engine import PostgresDatabase

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection

T = TypeVar("T")

DIALECT = PostgresDialect()


class _Binary:
    """The connection as :func:`run_async` uses it, asking for binary rows."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    async def execute(self, text: str, params: Any) -> Any:
        return await self._conn.execute(text, params, binary=True)

    def cursor(self) -> Any:
        return self._conn.cursor(binary=True)


class _Pooled(_Binary):
    """A connection of the pool, whose plan may send statements aside (:func:`~tabulae.storage.
    plan.aside`): they run on another connection of the pool, in pipeline mode."""

    def __init__(self, conn: Connection, database: PostgresDatabase) -> None:
        super().__init__(conn)
        self._database = database

    async def aside(self, steps: Sequence[Sql]) -> asyncio.Future[Any] | None:
        """The steps started on a spare connection, or None when none is to be had at once."""
        conn = await self._database.spare()
        if conn is None:
            return None
        started = asyncio.ensure_future(self._run_aside(conn, steps))
        await asyncio.sleep(0)  # it starts now: cancelled later, it still hands the connection back
        return started

    async def _run_aside(self, conn: Connection, steps: Sequence[Sql]) -> Any:
        """The steps' replies; a database error as psycopg raised it, so that the plan that
        collects them fails as if its own connection had (a lost one is tried again)."""
        try:
            async with conn.pipeline() as pipe:
                return await run_async(batched(steps), _Binary(conn), DIALECT, pipe)
        finally:
            await self._database.give_back(conn)


async def read(database: PostgresDatabase, make: Callable[[], Plan[T]]) -> T:
    async def run(conn: Connection) -> T:
        return await run_async(make(), _Binary(conn), DIALECT)

    return await database.run(run, idempotent=True)


async def read_pipelined(database: PostgresDatabase, make: Callable[[], Plan[T]]) -> T:
    """:func:`read` in libpq's pipeline mode: a statement whose answer the plan does not read
    (``BEGIN``, ``SET LOCAL``, ``COMMIT``) is only queued, and travels with the next one it reads,
    so a plan of many short statements waits once per statement it reads from."""

    async def run(conn: Connection) -> T:
        async with conn.pipeline() as pipe:
            return await run_async(make(), _Pooled(conn, database), DIALECT, pipe)

    return await database.run(run, idempotent=True)


async def write(database: PostgresDatabase, make: Callable[[], Plan[T]], *, transaction: bool = True) -> T:
    async def run(conn: Connection) -> T:
        if not transaction:
            return await run_async(make(), _Binary(conn), DIALECT)
        async with conn.transaction():
            return await run_async(make(), _Binary(conn), DIALECT)

    return await database.run(run, retry=transaction)
