"""The scale-out engine: one PostgreSQL (or Citus) database behind a connection pool.

Many stateless front-ends share one database, so every rule that matters is enforced by the
database transaction, never by a lock in this process. This module holds what every service's
PostgreSQL store shares: the pool, running a transaction with retries on serialization failures
and deadlocks, mapping engine errors to the service's, and creating (and, on Citus, distributing)
the schema of every store. Each store keeps to SQL that Citus can route to one shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tabulae.model.errors import TableError

if TYPE_CHECKING:
    Connection = psycopg.AsyncConnection[tuple[Any, ...]]
    Cursor = psycopg.AsyncCursor[tuple[Any, ...]]

T = TypeVar("T")

MAX_ATTEMPTS = 8  # tries of one write when it meets a conflict, a serialization failure or a deadlock


@dataclass(frozen=True, slots=True)
class Schema:
    """One store's tables: the statements creating them, and how Citus spreads them (reference
    tables are copied to every node; distributed ones are sharded by the named column)."""

    statements: tuple[str, ...]
    reference: tuple[str, ...] = ()
    distributed: dict[str, str] = field(default_factory=dict)

    @property
    def tables(self) -> tuple[str, ...]:
        return (*self.reference, *self.distributed)


class Restart(Exception):
    """The transaction met a concurrent change it cannot resolve in place; run it again."""


_RETRYABLE: tuple[type[Exception], ...] = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    Restart,
)


def database_error(exc: psycopg.Error) -> TableError:
    """An engine failure as the service reports it; the detail names the error class, not the SQL."""
    if isinstance(exc, PoolTimeout):
        return TableError("ServerBusy", detail="no database connection available")
    detail = type(exc).__name__ + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")
    return TableError("InternalError", detail=detail)


async def rollback(conn: Connection) -> None:
    """End a failed transaction, so the connection goes back to the pool clean. If the
    connection itself is broken the pool discards it, so errors here are not interesting."""
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        await conn.execute("ROLLBACK")


async def init_schema(url: str, schemas: Sequence[Schema], citus: bool = False) -> None:
    """Create every store's tables if missing; safe to run again and from several front-ends.

    With ``citus`` reference tables are made reference tables and distributed ones are distributed
    by their column; tables already registered with Citus are left as they are. The Citus
    extension must already be installed in the database (the cluster administrator's job).
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for schema in schemas:
            for statement in schema.statements:
                for attempt in range(3):
                    try:
                        await conn.execute(statement)
                        break
                    except (
                        pg_errors.UniqueViolation,
                        pg_errors.DuplicateTable,
                        pg_errors.DuplicateObject,
                        pg_errors.DuplicateFunction,
                    ):
                        # Another front-end created this table at the same moment; IF NOT EXISTS
                        # does not cover a creation still in flight. Once it committed, a retry finds it.
                        if attempt == 2:
                            raise
        if not citus:
            return
        every_table = [table for schema in schemas for table in schema.tables]
        cursor = await conn.execute(
            "SELECT logicalrelid::regclass::text FROM pg_dist_partition"
            " WHERE logicalrelid = ANY(%s::regclass[])",
            (every_table,),
        )
        done = {row[0] for row in await cursor.fetchall()}
        for schema in schemas:
            for table in schema.reference:
                if table not in done:
                    await conn.execute("SELECT create_reference_table(%s)", (table,))
            for table, column in schema.distributed.items():
                if table not in done:
                    await conn.execute("SELECT create_distributed_table(%s, %s)", (table, column))


class PostgresDatabase:
    """A connection pool over one database, and the one way stores run statements on it."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    @classmethod
    async def open(cls, url: str, *, min_size: int = 1, max_size: int = 16) -> PostgresDatabase:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            open=False,
            name="tabulae",
        )
        await pool.open(wait=True)
        return cls(pool)

    async def missing_tables(self, tables: Sequence[str]) -> bool:
        """True when any of ``tables`` does not exist yet."""
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM unnest(%s::text[]) AS t(name) WHERE to_regclass(t.name) IS NULL",
                (list(tables),),
            )
            row = await cursor.fetchone()
        return bool(row and row[0])

    async def close(self) -> None:
        await self.pool.close()

    async def account_document(self, table: str, account: str) -> bytes | None:
        """A per-account document (service properties): ``table`` has ``account`` and ``properties``."""

        async def run(conn: Connection) -> bytes | None:
            cursor = await conn.execute(f"SELECT properties FROM {table} WHERE account = %s", (account,))
            row = await cursor.fetchone()
            return bytes(row[0]) if row else None

        return await self.run(run, idempotent=True)

    async def set_account_document(self, table: str, account: str, document: bytes) -> None:
        """Replace a per-account document (see :meth:`account_document`)."""

        async def run(conn: Connection) -> None:
            await conn.execute(
                f"INSERT INTO {table} (account, properties) VALUES (%s, %s)"
                " ON CONFLICT (account) DO UPDATE SET properties = excluded.properties",
                (account, document),
            )

        await self.run(run, idempotent=True)

    async def run(
        self, fn: Callable[[Connection], Awaitable[T]], *, retry: bool = False, idempotent: bool = False
    ) -> T:
        """Run ``fn`` on a pooled connection, mapping engine errors to the service's errors.

        With ``retry``, ``fn`` is one whole transaction: it runs again, after a short random pause,
        when the engine reports a serialization failure or deadlock or ``fn`` raises
        :class:`Restart`. With ``idempotent``, a lost connection (the server restarted, a pooled
        connection went stale) is tried once more on a fresh one; writes that are not idempotent
        never are, as their first try may have committed.
        """
        attempts = MAX_ATTEMPTS if retry else 2 if idempotent else 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                async with self.pool.connection() as conn:
                    return await fn(conn)
            except _RETRYABLE as exc:
                if last:
                    # Still contended: the client should retry later (503), not see a failure.
                    raise TableError("ServerBusy", detail="too many concurrent changes") from exc
                await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
            except PoolTimeout as exc:
                raise database_error(exc) from exc
            except psycopg.OperationalError as exc:
                if not idempotent or last:
                    raise database_error(exc) from exc
            except psycopg.Error as exc:
                raise database_error(exc) from exc
        raise AssertionError("unreachable")
