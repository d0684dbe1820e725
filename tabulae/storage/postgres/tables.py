"""The scale-out backend: PostgreSQL, in one SQL dialect that also runs on Citus.

Many stateless front-ends share one database, so every rule that matters (ETags, uniqueness,
batch atomicity, the strictly increasing Timestamp) is enforced by the database transaction,
never by a lock in this process. The SQL keeps to what Citus can route to a single shard:

* ``entities`` is distributed by ``dist`` = the table id as 8 big-endian bytes followed by the
  PartitionKey as UTF-16BE. ``dist`` is part of the primary key ``(dist, rk)``, so an entity
  group transaction (one table, one PartitionKey) is a single-shard transaction.
* Keys are ``bytea`` of UTF-16BE, whose byte order is the service's ordinal UTF-16 order, and a
  fixed 8-byte id prefix keeps that order inside a table: ``ORDER BY dist, rk`` is key order
  and every range scan is a primary-key index range scan, paged by ``(dist, rk) > (…) LIMIT n``.
* ``tables`` and ``service_properties`` are small; under Citus they are reference tables,
  copied to every node, so checking that a table still exists is a local read on any shard.
* Table ids are random 63-bit integers (guarded by a unique constraint): front-ends need no
  shared sequence, and an id is never reused, so rows of a deleted table can never reappear in
  a table re-created under the same name. Every entity read checks, in the same statement, that
  its table id still exists: a reader never sees entities of a deleted table.
* Writes lock the touched rows (``SELECT … FOR UPDATE``), check existence and ETags, then write
  with conditional statements whose row counts are checked; a concurrent insert of a missing
  key or a serialization failure or deadlock (SQLSTATE 40001/40P01) restarts the transaction a
  few times. No triggers, no advisory locks, no reliance on SERIALIZABLE.

Statements of one transaction are pipelined, so a write costs three round trips to the server
whatever the size of its group, and a read one. Front-ends cache table name -> id as a hint
only: every statement that uses a cached id checks it, and a miss looks the name up again.
Rows come back in binary format, so ``bytea`` is not hex-encoded on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from tabulae.model import edm
from tabulae.model.entity import StoredEntity, check_merged, decode_properties, encode_properties
from tabulae.model.errors import TableError
from tabulae.storage.rules import check_condition, range_before_cursor
from tabulae.storage.tables import KeyBound, KeyRange, Mutation, MutationKind, Store

if TYPE_CHECKING:
    Connection = psycopg.AsyncConnection[tuple[Any, ...]]
    Cursor = psycopg.AsyncCursor[tuple[Any, ...]]

T = TypeVar("T")

SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS tables (
        account text COLLATE "C" NOT NULL,
        name_key text COLLATE "C" NOT NULL,
        name text NOT NULL,
        id bigint NOT NULL,
        acl bytea,
        CONSTRAINT tables_pkey PRIMARY KEY (account, name_key),
        CONSTRAINT tables_id_key UNIQUE (id)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS service_properties (
        account text COLLATE "C" NOT NULL,
        properties bytea NOT NULL,
        CONSTRAINT service_properties_pkey PRIMARY KEY (account)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS entities (
        dist bytea NOT NULL,
        rk bytea NOT NULL,
        ticks bigint NOT NULL,
        props bytea NOT NULL,
        CONSTRAINT entities_pkey PRIMARY KEY (dist, rk)
    )
    """,
)
SCHEMA_TABLES = ("tables", "service_properties", "entities")
REFERENCE_TABLES = ("tables", "service_properties")
DISTRIBUTED_TABLE, DISTRIBUTION_COLUMN = "entities", "dist"

MAX_ATTEMPTS = 8  # tries of one write when it meets a conflict, a serialization failure or a deadlock
MAX_TABLE_ID = 2**63 - 2  # ids are 1..2**63-2, so "id + 1" (the table's upper bound) fits 8 bytes
ID_CACHE_LIMIT = 10_000

_ID = struct.Struct(">q")

_LOOKUP = "SELECT id FROM tables WHERE account = %s AND name_key = %s"
_TABLE_ALIVE = "EXISTS (SELECT 1 FROM tables WHERE id = %s)"
_GET = f"SELECT ticks, props FROM entities WHERE dist = %s AND rk = %s AND {_TABLE_ALIVE}"
_LOCK = "SELECT rk, ticks, props FROM entities WHERE dist = %s AND rk = ANY(%s) ORDER BY rk FOR UPDATE"
_INSERT = (
    "INSERT INTO entities (dist, rk, ticks, props) VALUES (%s, %s, %s, %s) ON CONFLICT (dist, rk) DO NOTHING"
)
_UPDATE = "UPDATE entities SET ticks = %s, props = %s WHERE dist = %s AND rk = %s AND ticks = %s"
_DELETE = "DELETE FROM entities WHERE dist = %s AND rk = %s AND ticks = %s"


class _Restart(Exception):
    """The transaction met a concurrent change it cannot resolve in place; run it again."""


_RETRYABLE: tuple[type[Exception], ...] = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    _Restart,
)


def _key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _text(key: bytes) -> str:
    return key.decode("utf-16-be", "surrogatepass")


def _prefix(table_id: int) -> bytes:
    """The first bytes of every ``dist`` of a table; ``_prefix(id + 1)`` bounds the table above."""
    return _ID.pack(table_id)


def _dist(table_id: int, pk: str) -> bytes:
    return _ID.pack(table_id) + _key(pk)


def _bound_sql(table_id: int, bound: KeyBound, lower: bool, args: list[Any]) -> str:
    """A KeyBound as SQL. With ``rk`` None the bound is a partition edge: since every ``dist`` of a
    partition equals ``prefix || pk`` exactly, comparing ``dist`` alone includes or excludes the
    whole partition, and longer keys that extend ``pk`` sort after it, as they do in UTF-16."""
    op = (">" if lower else "<") + ("=" if bound.inclusive else "")
    if bound.rk is None:
        args.append(_dist(table_id, bound.pk))
        return f" AND dist {op} %s"
    args.extend((_dist(table_id, bound.pk), _key(bound.rk)))
    return f" AND (dist, rk) {op} (%s, %s)"


def _single_partition(key_range: KeyRange) -> str | None:
    """The PartitionKey every key of the range has, if there is one: such a scan names its
    ``dist`` exactly, so Citus routes it to one shard instead of asking all of them."""
    lower, upper = key_range.lower, key_range.upper
    if lower is None or upper is None or lower.pk != upper.pk:
        return None
    if (lower.rk is None and not lower.inclusive) or (upper.rk is None and not upper.inclusive):
        return None
    return lower.pk


def _database_error(exc: psycopg.Error) -> TableError:
    """An engine failure as the service reports it; the detail names the error class, not the SQL."""
    if isinstance(exc, PoolTimeout):
        return TableError("ServerBusy", detail="no database connection available")
    detail = type(exc).__name__ + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")
    return TableError("InternalError", detail=detail)


async def _rollback(conn: Connection) -> None:
    """End a failed transaction, so the connection goes back to the pool clean. If the
    connection itself is broken the pool discards it, so errors here are not interesting."""
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        await conn.execute("ROLLBACK")


async def init_schema(url: str, citus: bool = False) -> None:
    """Create the schema if it is missing; safe to run again and from several front-ends at once.

    With ``citus`` the metadata tables become reference tables and ``entities`` is distributed by
    ``dist``; tables already registered with Citus are left as they are. The Citus extension must
    already be installed in the database (that is the cluster administrator's job).
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for statement in SCHEMA:
            for attempt in range(3):
                try:
                    await conn.execute(statement)
                    break
                except (pg_errors.UniqueViolation, pg_errors.DuplicateTable, pg_errors.DuplicateObject):
                    # Another front-end created this table at the same moment; IF NOT EXISTS does
                    # not cover a creation still in flight. Once it committed, a retry finds it.
                    if attempt == 2:
                        raise
        if not citus:
            return
        cursor = await conn.execute(
            "SELECT logicalrelid::regclass::text FROM pg_dist_partition"
            " WHERE logicalrelid = ANY(%s::regclass[])",
            (list(SCHEMA_TABLES),),
        )
        done = {row[0] for row in await cursor.fetchall()}
        for table in REFERENCE_TABLES:
            if table not in done:
                await conn.execute("SELECT create_reference_table(%s)", (table,))
        if DISTRIBUTED_TABLE not in done:
            await conn.execute(
                "SELECT create_distributed_table(%s, %s)", (DISTRIBUTED_TABLE, DISTRIBUTION_COLUMN)
            )


class PostgresStore(Store):
    """A :class:`Store` on PostgreSQL or Citus; create it with ``await PostgresStore.open(url)``."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool
        self._ids: dict[tuple[str, str], int] = {}  # (account, lower-cased name) -> table id, a hint

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 1, max_size: int = 16, create_schema: bool = True
    ) -> PostgresStore:
        """Connect a pool to ``url``. On a database without our tables, create the plain
        (non-Citus) schema first, so ``serve`` against an empty database just works."""
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            open=False,
            name="tabulae",
        )
        await pool.open(wait=True)
        store = cls(pool)
        try:
            if create_schema and await store._schema_missing():
                await init_schema(url, citus=False)
        except BaseException:
            await pool.close()
            raise
        return store

    async def _schema_missing(self) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM unnest(%s::text[]) AS t(name) WHERE to_regclass(t.name) IS NULL",
                (list(SCHEMA_TABLES),),
            )
            row = await cursor.fetchone()
        return bool(row and row[0])

    async def close(self) -> None:
        await self._pool.close()

    # ----------------------------------------------------------------------------- plumbing

    async def _run(
        self, fn: Callable[[Connection], Awaitable[T]], *, retry: bool = False, idempotent: bool = False
    ) -> T:
        """Run ``fn`` on a pooled connection, mapping engine errors to TableErrors.

        With ``retry``, ``fn`` is one whole transaction: it runs again, after a short random pause,
        when the engine reports a serialization failure or deadlock or ``fn`` asks for a restart.
        With ``idempotent``, a lost connection (the server restarted, a pooled connection went
        stale) is tried once more on a fresh one; writes that are not idempotent never are, as
        their first try may have committed.
        """
        attempts = MAX_ATTEMPTS if retry else 2 if idempotent else 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                async with self._pool.connection() as conn:
                    return await fn(conn)
            except _RETRYABLE as exc:
                if last:
                    # Still contended: the client should retry later (503), not see a failure.
                    raise TableError("ServerBusy", detail="too many concurrent changes") from exc
                await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2**attempt)))
            except PoolTimeout as exc:
                raise _database_error(exc) from exc
            except psycopg.OperationalError as exc:
                if not idempotent or last:
                    raise _database_error(exc) from exc
            except psycopg.Error as exc:
                raise _database_error(exc) from exc
        raise AssertionError("unreachable")

    def _remember(self, key: tuple[str, str], table_id: int | None) -> None:
        if table_id is None:
            self._ids.pop(key, None)
            return
        if len(self._ids) >= ID_CACHE_LIMIT:
            self._ids.clear()
        self._ids[key] = table_id

    async def _lookup(self, conn: Connection, key: tuple[str, str]) -> int | None:
        """The table's current id, read from the database (and remembered)."""
        row = await (await conn.execute(_LOOKUP, key)).fetchone()
        table_id = int(row[0]) if row else None
        self._remember(key, table_id)
        return table_id

    async def _table_id(self, conn: Connection, key: tuple[str, str]) -> int:
        """The cached id, or the current one; raises ``TableNotFound``."""
        table_id = self._ids.get(key)
        if table_id is None:
            table_id = await self._lookup(conn, key)
            if table_id is None:
                raise TableError("TableNotFound")
        return table_id

    async def _confirm_empty(self, conn: Connection, key: tuple[str, str], table_id: int) -> bool:
        """A read using ``table_id`` found nothing: True if that really means no rows, False if the
        cached id was stale and the read must run again. Raises ``TableNotFound``."""
        current = await self._lookup(conn, key)
        if current is None:
            raise TableError("TableNotFound")
        return current == table_id

    # ----------------------------------------------------------------------------- tables

    async def create_table(self, account: str, name: str) -> None:
        key = (account, name.lower())

        async def run(conn: Connection) -> None:
            for _ in range(3):
                table_id = secrets.randbelow(MAX_TABLE_ID) + 1
                try:
                    cursor = await conn.execute(
                        "INSERT INTO tables (account, name_key, name, id) VALUES (%s, %s, %s, %s)"
                        " ON CONFLICT (account, name_key) DO NOTHING",
                        (account, key[1], name, table_id),
                    )
                except pg_errors.UniqueViolation:
                    continue  # a random id met an existing one (about never): draw again
                if cursor.rowcount == 0:
                    raise TableError("TableAlreadyExists")
                self._remember(key, table_id)
                return
            raise TableError("InternalError", detail="could not draw a free table id")

        await self._run(run)

    async def delete_table(self, account: str, name: str) -> None:
        """Delete the table row and its entities in one transaction.

        Readers check the table id in the same statement as the entities, so none can see
        entities of the deleted table even on Citus, where the row and the shards may commit on
        different nodes; a write that raced with the deletion can at worst leave rows under an id
        that no longer exists and is never reused, which no read returns.
        """
        key = (account, name.lower())

        async def run(conn: Connection) -> None:
            async with conn.transaction():
                cursor = await conn.execute(
                    "DELETE FROM tables WHERE account = %s AND name_key = %s RETURNING id", key
                )
                row = await cursor.fetchone()
                if row is None:
                    raise TableError("ResourceNotFound")
                table_id = int(row[0])
                await conn.execute(
                    "DELETE FROM entities WHERE dist >= %s AND dist < %s",
                    (_prefix(table_id), _prefix(table_id + 1)),
                )
            self._remember(key, None)

        await self._run(run, retry=True)

    async def get_table(self, account: str, name: str) -> str | None:
        async def run(conn: Connection) -> str | None:
            cursor = await conn.execute(
                "SELECT name FROM tables WHERE account = %s AND name_key = %s", (account, name.lower())
            )
            row = await cursor.fetchone()
            return str(row[0]) if row else None

        return await self._run(run, idempotent=True)

    async def list_tables(self, account: str, after: str | None, limit: int) -> list[str]:
        async def run(conn: Connection) -> list[str]:
            cursor = await conn.execute(
                "SELECT name FROM tables WHERE account = %s AND name_key > %s ORDER BY name_key LIMIT %s",
                (account, after or "", limit),
            )
            return [str(row[0]) for row in await cursor.fetchall()]

        return await self._run(run, idempotent=True)

    async def get_acl(self, account: str, table: str) -> bytes | None:
        async def run(conn: Connection) -> bytes | None:
            cursor = await conn.execute(
                "SELECT acl FROM tables WHERE account = %s AND name_key = %s", (account, table.lower())
            )
            row = await cursor.fetchone()
            if row is None:
                raise TableError("TableNotFound")
            return None if row[0] is None else bytes(row[0])

        return await self._run(run, idempotent=True)

    async def set_acl(self, account: str, table: str, acl: bytes) -> None:
        async def run(conn: Connection) -> None:
            cursor = await conn.execute(
                "UPDATE tables SET acl = %s WHERE account = %s AND name_key = %s",
                (acl, account, table.lower()),
            )
            if cursor.rowcount == 0:
                raise TableError("TableNotFound")

        await self._run(run, idempotent=True)

    async def get_service_properties(self, account: str) -> bytes | None:
        async def run(conn: Connection) -> bytes | None:
            cursor = await conn.execute(
                "SELECT properties FROM service_properties WHERE account = %s", (account,)
            )
            row = await cursor.fetchone()
            return bytes(row[0]) if row else None

        return await self._run(run, idempotent=True)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        async def run(conn: Connection) -> None:
            await conn.execute(
                "INSERT INTO service_properties (account, properties) VALUES (%s, %s)"
                " ON CONFLICT (account) DO UPDATE SET properties = excluded.properties",
                (account, properties),
            )

        await self._run(run, idempotent=True)

    # ----------------------------------------------------------------------------- reads

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity | None:
        key = (account, table.lower())

        async def run(conn: Connection) -> StoredEntity | None:
            for _ in range(MAX_ATTEMPTS):
                table_id = await self._table_id(conn, key)
                cursor = await conn.execute(_GET, (_dist(table_id, pk), _key(rk), table_id), binary=True)
                row = await cursor.fetchone()
                if row is not None:
                    return StoredEntity(pk, rk, int(row[0]), bytes(row[1]))
                if await self._confirm_empty(conn, key, table_id):
                    return None
            raise _Restart

        return await self._run(run, idempotent=True)

    async def scan(
        self,
        account: str,
        table: str,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[StoredEntity]:
        key = (account, table.lower())

        async def run(conn: Connection) -> list[StoredEntity]:
            for _ in range(MAX_ATTEMPTS):
                table_id = await self._table_id(conn, key)
                found = await self._scan(conn, table_id, ranges, after, limit)
                if found or await self._confirm_empty(conn, key, table_id):
                    return found
            raise _Restart

        return await self._run(run, idempotent=True)

    async def _scan(
        self,
        conn: Connection,
        table_id: int,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[StoredEntity]:
        found: list[StoredEntity] = []
        if limit <= 0:
            return found
        for key_range in ranges:
            if after is not None and range_before_cursor(key_range, after):
                continue
            args: list[Any] = [_prefix(table_id), _prefix(table_id + 1)]
            sql = "SELECT dist, rk, ticks, props FROM entities WHERE dist >= %s AND dist < %s"
            partition = _single_partition(key_range)
            if partition is not None:
                sql += " AND dist = %s"
                args.append(_dist(table_id, partition))
            if key_range.lower is not None:
                sql += _bound_sql(table_id, key_range.lower, True, args)
            if key_range.upper is not None:
                sql += _bound_sql(table_id, key_range.upper, False, args)
            if after is not None:
                sql += " AND (dist, rk) > (%s, %s)"
                args.extend((_dist(table_id, after[0]), _key(after[1])))
            sql += f" AND {_TABLE_ALIVE} ORDER BY dist, rk LIMIT %s"
            args.extend((table_id, limit - len(found)))
            cursor = await conn.execute(sql, args, binary=True)
            for dist, rk, ticks, props in await cursor.fetchall():
                found.append(StoredEntity(_text(bytes(dist[8:])), _text(bytes(rk)), int(ticks), bytes(props)))
            if len(found) >= limit:
                break
        return found

    # ----------------------------------------------------------------------------- writes

    async def apply(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        key = (account, table.lower())
        group = tuple(mutations)

        async def run(conn: Connection) -> list[StoredEntity | None]:
            return await self._apply(conn, key, group)

        return await self._run(run, retry=True)

    async def _lock(self, conn: Connection, table_id: int, mutations: tuple[Mutation, ...]) -> list[Cursor]:
        """Queue ``SELECT … FOR UPDATE`` of the touched keys, one statement per PartitionKey (one
        for an entity group transaction), partitions and rows in key order so that two groups
        lock common rows in the same order."""
        by_pk: dict[str, set[str]] = {}
        for mutation in mutations:
            by_pk.setdefault(mutation.pk, set()).add(mutation.rk)
        cursors = []
        for pk in sorted(by_pk, key=edm.utf16_sort_key):
            rks = sorted(_key(rk) for rk in by_pk[pk])
            cursors.append(await conn.execute(_LOCK, (_dist(table_id, pk), rks), binary=True))
        return cursors

    async def _apply(
        self, conn: Connection, key: tuple[str, str], mutations: tuple[Mutation, ...]
    ) -> list[StoredEntity | None]:
        """One try of an atomic group, in three pipelined round trips.

        1. ``BEGIN``, look the table up and lock the touched rows (with the cached table id; the
           lookup in the same round trip tells whether it was right).
        2. Knowing the stored state, check every condition here, then send the writes. Each is
           conditional on the state that was read (``ticks = old``, or ``ON CONFLICT DO NOTHING``
           for a key that was missing); a zero row count means a concurrent transaction got
           there first, and the group is rolled back and restarted.
        3. ``COMMIT``.

        BEGIN and COMMIT are sent by hand (the pool's connections are in autocommit mode)
        because psycopg's transaction block would wait for the server at both ends.
        """
        try:
            async with conn.pipeline() as pipeline:
                await conn.execute("BEGIN")
                results = await self._apply_in_transaction(conn, pipeline, key, mutations)
                await conn.execute("COMMIT")
        except BaseException:
            await _rollback(conn)
            raise
        return results

    async def _apply_in_transaction(
        self,
        conn: Connection,
        pipeline: psycopg.AsyncPipeline,
        key: tuple[str, str],
        mutations: tuple[Mutation, ...],
    ) -> list[StoredEntity | None]:
        cached = self._ids.get(key)
        lookup = await conn.execute(_LOOKUP, key)
        locks = await self._lock(conn, cached, mutations) if cached is not None else []
        row = await lookup.fetchone()
        table_id = int(row[0]) if row else None
        self._remember(key, table_id)
        if table_id is None:
            raise TableError("TableNotFound")
        if table_id != cached:
            locks = await self._lock(conn, table_id, mutations)
        state: dict[tuple[bytes, bytes], tuple[int, bytes] | None] = {}
        partitions = sorted({m.pk for m in mutations}, key=edm.utf16_sort_key)
        for cursor, pk in zip(locks, partitions, strict=True):
            for rk, ticks, props in await cursor.fetchall():
                state[(_dist(table_id, pk), bytes(rk))] = (int(ticks), bytes(props))

        ticks = max([edm.now_ticks()] + [stored[0] + 1 for stored in state.values() if stored])
        results: list[StoredEntity | None] = []
        writes: list[tuple[int, bool, Cursor]] = []  # (index, was an insert, cursor)
        for index, mutation in enumerate(mutations):
            row_key = (_dist(table_id, mutation.pk), _key(mutation.rk))
            existing = state.get(row_key)
            try:
                check_condition(mutation, existing)
                blob = self._new_blob(mutation, existing)
            except TableError as exc:
                raise exc.at(index) from None
            if mutation.kind is MutationKind.DELETE:
                assert existing is not None  # check_condition guarantees it
                cursor = await conn.execute(_DELETE, (*row_key, existing[0]))
                state[row_key] = None
                results.append(None)
            else:
                assert blob is not None
                if existing is None:
                    cursor = await conn.execute(_INSERT, (*row_key, ticks, blob))
                else:
                    cursor = await conn.execute(_UPDATE, (ticks, blob, *row_key, existing[0]))
                state[row_key] = (ticks, blob)
                results.append(StoredEntity(mutation.pk, mutation.rk, ticks, blob))
            writes.append((index, existing is None, cursor))

        await pipeline.sync()
        for index, inserted, cursor in writes:
            if cursor.rowcount != 1:
                if inserted and mutations[index].kind is MutationKind.INSERT:
                    raise TableError("EntityAlreadyExists").at(index)
                raise _Restart
        return results

    @staticmethod
    def _new_blob(mutation: Mutation, existing: tuple[int, bytes] | None) -> bytes | None:
        """The stored properties after ``mutation`` (``None`` for DELETE); merges are checked
        against the limits, as their result can exceed what the request alone did."""
        if mutation.kind is MutationKind.DELETE:
            return None
        properties = mutation.properties or {}
        if mutation.kind is MutationKind.MERGE and existing is not None:
            merged = decode_properties(existing[1])
            merged.update(properties)
            check_merged(mutation.pk, mutation.rk, merged)
            properties = merged
        return encode_properties(properties)
