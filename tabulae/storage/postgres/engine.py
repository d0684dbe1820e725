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
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tabulae.model.errors import ServiceError
from tabulae.storage.plan import Dialect, Plan, PostgresDialect, Restart, run_async
from tabulae.storage.postgres import pipelined
from tabulae.storage.volume import FULL_MESSAGE, Volume

__all__ = ["MAX_ATTEMPTS", "PostgresDatabase", "Restart", "Schema"]

if TYPE_CHECKING:
    Connection = psycopg.AsyncConnection[tuple[Any, ...]]
    Cursor = psycopg.AsyncCursor[tuple[Any, ...]]

T = TypeVar("T")

RETURN_EVERY = 1000  # uses after which a kept connection goes back through the pool
KEPT_IDLE = 5.0  # seconds unused after which a kept connection goes back to the pool
MAX_ATTEMPTS = 8  # tries of one write when it meets a conflict, a serialization failure or a deadlock
SPARE_WAIT = 1.0  # seconds a spare connection may take to open (none idle, the pool not full)


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


_RETRYABLE: tuple[type[Exception], ...] = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    Restart,
)


def database_error(exc: psycopg.Error) -> ServiceError:
    """An engine failure as the service reports it; the detail names the error class, not the SQL."""
    if isinstance(exc, PoolTimeout):
        return ServiceError("ServerBusy", detail="no database connection available")
    detail = type(exc).__name__ + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")
    if isinstance(exc, pg_errors.DiskFull):  # the database's disk: retried later, as Azure's 503
        return ServiceError("ServerBusy", FULL_MESSAGE, detail=detail)
    return ServiceError("InternalError", detail=detail)


async def rollback(conn: Connection) -> None:
    """End a failed transaction, so the connection goes back to the pool clean. If the
    connection itself is broken the pool discards it, so errors here are not interesting."""
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        await conn.execute("ROLLBACK")


class SchemaError(Exception):
    """The database is not in a state this command can work with; the message says what to run.
    Raised before anything was changed."""


# What ``db init --citus`` sets on the database (``ALTER DATABASE … SET``), so that every session
# a front-end opens on the coordinator starts with it; the README explains each one.
CITUS_SETTINGS: dict[str, str] = {
    # A multi-shard statement (a scan of a whole table, a table's deletion) uses one connection
    # per worker and runs its shard queries one after another on it, instead of opening up to
    # 16 connections per worker for a page of at most 1,000 rows.
    "citus.max_adaptive_executor_pool_size": "1",
    # Each coordinator session keeps that one connection per worker open between statements, so
    # the next statement reuses it instead of starting a new worker backend.
    "citus.max_cached_conns_per_worker": "1",
}

_CITUS_PRESENT = "SELECT to_regclass('pg_dist_partition') IS NOT NULL"
_DISTRIBUTED = (
    "SELECT logicalrelid::regclass::text FROM pg_dist_partition"
    " WHERE logicalrelid = ANY(SELECT to_regclass(t.name) FROM unnest(%s::text[]) AS t(name))"
)
_EXISTING = "SELECT t.name FROM unnest(%s::text[]) AS t(name) WHERE to_regclass(t.name) IS NOT NULL"


async def citus_present(conn: Connection) -> bool:
    """True when the Citus extension is installed in the connected database (its catalog is there)."""
    row = await (await conn.execute(_CITUS_PRESENT)).fetchone()
    return bool(row and row[0])


async def citus_subquery_pushdown(conn: Connection) -> bool:
    """True when this Citus knows ``citus.subquery_pushdown``, which dense scans' wide probes
    use (:mod:`.citus_scans`)."""
    row = await (await conn.execute("SELECT current_setting('citus.subquery_pushdown', true)")).fetchone()
    return bool(row and row[0] is not None)


async def partition_epoch_present(conn: Connection) -> bool:
    """True when the schema has the Table store's partition epoch (:mod:`.citus_scans`)."""
    row = await (await conn.execute("SELECT to_regclass('entity_partition_epoch') IS NOT NULL")).fetchone()
    return bool(row and row[0])


async def _existing(conn: Connection, tables: Sequence[str]) -> set[str]:
    return {row[0] for row in await (await conn.execute(_EXISTING, (list(tables),))).fetchall()}


async def _distributed(conn: Connection, tables: Sequence[str]) -> set[str]:
    return {row[0] for row in await (await conn.execute(_DISTRIBUTED, (list(tables),))).fetchall()}


async def _create_tables(conn: Connection, schemas: Sequence[Schema]) -> None:
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
                    # Another front-end created this table or function at the same moment; IF NOT EXISTS
                    # does not cover a creation still in flight. Once it committed, a retry finds it.
                    if attempt == 2:
                        raise


def _every_table(schemas: Sequence[Schema]) -> list[str]:
    return [table for schema in schemas for table in schema.tables]


async def check_serving(url: str, schemas: Sequence[Schema]) -> None:
    """Make the database ready to serve, or say why it is not: on plain PostgreSQL create the
    schema where it is missing; with Citus installed insist on ``db init --citus`` having run,
    since tables created here would be local ones that Citus never spreads over its workers."""
    every_table = _every_table(schemas)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        if not await citus_present(conn):
            if len(await _existing(conn, every_table)) < len(every_table):
                await _create_tables(conn, schemas)
            return
        local = [table for table in every_table if table not in await _distributed(conn, every_table)]
    if local:
        raise SchemaError(
            "this database has the Citus extension, but Tabulae's tables are not distributed"
            f" ({', '.join(local[:3])}{', …' if len(local) > 3 else ''}); run"
            " `tabulae db init --citus --store URL` first (nothing was created)"
        )


async def init_schema(url: str, schemas: Sequence[Schema], citus: bool = False) -> list[str]:
    """Create every store's tables if missing; safe to run again and from several front-ends.
    Returns what it did, one line each, for the operator. Without ``citus`` a database with the
    Citus extension is refused (:class:`SchemaError`): its tables would stay local.

    With ``citus`` the Citus extension must be installed (the cluster administrator's job):
    without it :class:`SchemaError` is raised before anything is created. Tables are created and
    registered with Citus in one transaction, so a failure (no worker nodes, say) leaves nothing
    behind: reference tables are made reference tables and distributed ones distributed by their
    column. Tables already registered are left as they are; tables created earlier without
    ``--citus`` are distributed, their rows moved to the shards and the local copy empty_local. Then
    :data:`CITUS_SETTINGS` are set on the database.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        present = await citus_present(conn)
        if not citus and present:
            raise SchemaError(
                "this database has the Citus extension: run `tabulae db init --citus` to create a"
                " distributed schema (without --citus the tables would stay local; nothing was created)"
            )
        if not citus:
            await _create_tables(conn, schemas)
            return ["schema ready"]
        if not present:
            raise SchemaError(
                "the Citus extension is not installed in this database: run `CREATE EXTENSION citus`"
                " as a superuser on the coordinator and on every worker, add the workers"
                " (citus_add_node), then run `tabulae db init --citus` again (nothing was created)"
            )
        every_table = _every_table(schemas)
        done: list[str] = []
        empty_local: list[str] = []
        try:
            async with conn.transaction():
                existing = await _existing(conn, every_table)
                registered = await _distributed(conn, every_table)
                await _create_tables(conn, schemas)
                for schema in schemas:
                    for table in (*schema.reference, *schema.distributed):
                        if table in registered:
                            continue
                        had_rows = table in existing and await _has_rows(conn, table)
                        column = schema.distributed.get(table)
                        if column is None:
                            await conn.execute("SELECT create_reference_table(%s)", (table,))
                        else:
                            await conn.execute("SELECT create_distributed_table(%s, %s)", (table, column))
                        if had_rows:
                            # Citus copied the rows to the shards and leaves the local ones behind,
                            # unseen by every query; empty them so no stale copy stays.
                            await conn.execute(
                                "SELECT truncate_local_data_after_distributing_table(%s)", (table,)
                            )
                            done.append(f"moved the rows of the local table {table} to Citus")
                        elif table in existing:
                            empty_local.append(table)
        except psycopg.Error as exc:
            raise SchemaError(
                f"Citus refused to distribute the schema, and nothing was changed: {exc}"
            ) from None
        if empty_local:
            done.append("distributed the existing empty tables " + ", ".join(empty_local))
        name = await (await conn.execute("SELECT current_database()")).fetchone()
        assert name is not None
        # one front-end at a time: two setting the same database's settings at once fail with
        # "tuple concurrently updated" (seen with inits of two schemas of one database)
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('tabulae: database settings'))")
            for setting, value in CITUS_SETTINGS.items():
                await conn.execute(
                    sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                        sql.Identifier(name[0]), sql.SQL(setting), sql.Literal(value)
                    )
                )
        done.append(
            "schema ready and distributed with Citus; set "
            + ", ".join(f"{setting} = {value}" for setting, value in CITUS_SETTINGS.items())
        )
        return done


async def _has_rows(conn: Connection, table: str) -> bool:
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(sql.Identifier(table))
    row = await (await conn.execute(query)).fetchone()
    return bool(row and row[0])


class PostgresDatabase:
    """A connection pool over one database, and the one way stores run statements on it."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        self.dialect = PostgresDialect()
        self.volume = Volume(None)  # the database's disk: full from its "disk full" error for a while
        # Connections kept between operations instead of going back to the pool: the pool's
        # checkout (its lock, checks, statistics, the connection's own commit on leaving its
        # block) costs more CPU than a point read's statement. Every connection may be kept, since
        # every user takes its connections here (uploads through :meth:`take`), and each goes
        # back every RETURN_EVERY uses, and after KEPT_IDLE seconds unused, so the pool's lifetime
        # and idle rules still apply (an idle server's connections close after the pool's
        # max_idle, as without keeping; servers sharing one database must not hold theirs for
        # ever). While someone waits on the pool for one, connections go back there instead, or
        # they would wait on. Most recently kept last, with the time it was kept.
        self._kept: list[tuple[Connection, float]] = []
        self._keep = pool.max_size
        self._uses = 0
        self._waiting = 0  # operations waiting on the pool for a connection
        self._sweeper: asyncio.Task[None] | None = None  # returns connections kept too long unused
        self.kept_idle = KEPT_IDLE

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

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        kept, self._kept = self._kept, []
        for conn, _ in kept:
            await self.pool.putconn(conn)
        await self.pool.close()

    async def _release(self, conn: Connection) -> None:
        """Keep ``conn`` for the next operation when it is clean, else hand it to the pool (which
        ends a transaction left open, or replaces a broken connection)."""
        self._uses += 1
        if (
            len(self._kept) < self._keep
            and not self._waiting
            and self._uses % RETURN_EVERY
            and conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
            and not self.pool.closed
        ):
            self._kept.append((conn, time.monotonic()))
            if self._sweeper is None:
                self._sweeper = asyncio.create_task(self._sweep())
        else:
            await self.pool.putconn(conn)

    async def _sweep(self) -> None:
        """While connections are kept, hand those unused for ``kept_idle`` seconds back to the pool
        (the least recently kept come first, as the newest are taken first)."""
        try:
            while self._kept:
                await asyncio.sleep(self.kept_idle)
                horizon = time.monotonic() - self.kept_idle
                while self._kept and self._kept[0][1] <= horizon:
                    conn, _ = self._kept.pop(0)
                    await self.pool.putconn(conn)
        finally:
            self._sweeper = None

    async def take(self) -> Connection:
        """A connection for a caller that holds it across awaits of its own (an upload's open
        transaction), to hand back with :meth:`give_back`. Taken here rather than from the pool,
        so that connections kept between operations never leave such a caller waiting for one."""
        try:
            return await self._get()
        except psycopg.Error as exc:
            raise database_error(exc) from exc

    async def _get(self) -> Connection:
        """A kept connection, else one from the pool."""
        if self._kept:
            return self._kept.pop()[0]
        self._waiting += 1
        try:
            return await self.pool.getconn()
        finally:
            self._waiting -= 1

    async def spare(self) -> Connection | None:
        """A connection for work beside an operation's own (:func:`~tabulae.storage.plan.aside`),
        only if one is to be had without waiting on others: a kept one, or one the pool has idle
        or may still open. Never waiting keeps operations that each hold a connection from
        waiting on each other's. Hand it back with :meth:`give_back`."""
        if self._kept:
            return self._kept.pop()[0]
        stats = self.pool.get_stats()
        if self._waiting or (
            stats.get("pool_available", 0) == 0 and stats.get("pool_size", 0) >= self.pool.max_size
        ):
            return None
        try:
            return await self.pool.getconn(timeout=SPARE_WAIT)
        except PoolTimeout:
            return None

    async def give_back(self, conn: Connection) -> None:
        """Return a connection from :meth:`take`, its transaction ended (else the pool ends it)."""
        await self._release(conn)

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
        try:
            result = await self._run(fn, retry=retry, idempotent=idempotent)
        except ServiceError as exc:
            if isinstance(exc.__cause__, pg_errors.DiskFull):
                self.volume.hit_full(exc.detail)
            raise
        if retry or not idempotent:
            self.volume.write_succeeded()
        return result

    async def _run(self, fn: Callable[[Connection], Awaitable[T]], *, retry: bool, idempotent: bool) -> T:
        attempts = MAX_ATTEMPTS if retry else 2 if idempotent else 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                conn = self._kept.pop()[0] if self._kept else await self._get()
                try:
                    return await fn(conn)
                finally:
                    await self._release(conn)
            except _RETRYABLE as exc:
                if last:
                    # Still contended: the client should retry later (503), not see a failure.
                    raise ServiceError("ServerBusy", detail="too many concurrent changes") from exc
                await _pause(attempt)
            except PoolTimeout as exc:
                raise database_error(exc) from exc
            except psycopg.OperationalError as exc:
                if not idempotent or last:
                    raise database_error(exc) from exc
            except psycopg.Error as exc:
                raise database_error(exc) from exc
        raise AssertionError("unreachable")

    async def run_plan(
        self,
        make: Callable[[], Plan[T]],
        *,
        retry: bool = False,
        idempotent: bool = False,
        transaction: bool = False,
        isolation: str | None = None,
        dialect: Dialect | None = None,
        pipeline: bool = False,
    ) -> T:
        """Run the plan ``make()`` returns as :meth:`run` runs a function (a fresh plan each try),
        in one transaction when asked (at ``isolation`` when given, e.g. ``REPEATABLE READ`` for
        reads that must see one snapshot), else statement by statement in autocommit. ``dialect``
        is a store's own (with markers of its own), else the engine's. With ``pipeline`` the
        transaction runs in pipeline mode (:mod:`~tabulae.storage.postgres.pipelined`)."""
        spelling = dialect or self.dialect

        async def fn(conn: Connection) -> T:
            if pipeline:
                return await pipelined.transaction(conn, make, spelling)
            if not transaction:
                return await run_async(make(), conn, spelling)
            async with conn.transaction():
                if isolation is not None:
                    await conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                return await run_async(make(), conn, spelling)

        return await self.run(fn, retry=retry, idempotent=idempotent)

    async def run_with_new_id(
        self,
        make: Callable[[int], Plan[T]],
        *,
        limit: int,
        retry: bool = False,
        dialect: Dialect | None = None,
    ) -> tuple[T, int]:
        """Run ``make(id)`` with a random id from 1 to ``limit`` for a new row (ids are random so
        that no sequence is shared by Citus nodes); a unique violation draws another id."""
        for _ in range(3):
            new_id = secrets.randbelow(limit) + 1
            try:
                return await self.run_plan(partial(make, new_id), retry=retry, dialect=dialect), new_id
            except ServiceError as exc:
                if not isinstance(exc.__cause__, pg_errors.UniqueViolation):
                    raise  # else the id met an existing one: draw again
        raise ServiceError("InternalError", detail="could not draw a free id")

    async def commit_in(self, conn: Connection, make: Callable[[], Plan[T]]) -> T:
        """Run a plan in a savepoint of the transaction open on ``conn`` (an upload's, whose chunks
        it commits) and commit that transaction, in one pipeline; again on conflicts as
        :meth:`run` does, without starting that transaction over. When it raises, the
        transaction is still open (the caller rolls it back) or the COMMIT itself failed."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                return await pipelined.commit_step(conn, make, self.dialect)
            except _RETRYABLE:
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    raise ServiceError("InternalError", detail="the commit failed") from None
                if attempt == MAX_ATTEMPTS - 1:
                    raise ServiceError("ServerBusy", detail="too many concurrent changes") from None
                await _pause(attempt)
            except psycopg.Error as exc:
                raise database_error(exc) from exc
        raise AssertionError("unreachable")


async def _pause(attempt: int) -> None:
    """A short random pause before another try, longer after each conflict."""
    await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
