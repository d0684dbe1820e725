"""The Table store on PostgreSQL, in one SQL dialect that also runs on Citus.

ETags, uniqueness, batch atomicity and the strictly increasing Timestamp are enforced by the
database transaction (see :mod:`.engine`). The SQL keeps to what Citus can route to one shard:

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

import secrets
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import TableError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.postgres.engine import MAX_ATTEMPTS, PostgresDatabase, Restart, Schema, rollback
from tabulae.storage.postgres.indexes import PostgresIndexes, drop_table_indexes
from tabulae.storage.postgres.pushdown import NUL_ESCAPE, UNDECIDED, PostgresDialect, record_sql
from tabulae.storage.pushdown import Fragment, Translation, translate
from tabulae.storage.rules import (
    KeyColumns,
    check_condition,
    group_ticks,
    range_sql,
    ranges_to_scan,
    written_properties,
)
from tabulae.storage.tables import Condition, KeyRange, ScanChunk, TableStore

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection, Cursor

_STATEMENTS = (
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
SCHEMA = Schema(_STATEMENTS, reference=("tables", "service_properties"), distributed={"entities": "dist"})

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


_key = edm.utf16_sort_key
_text = edm.from_utf16_sort_key


def _prefix(table_id: int) -> bytes:
    """The first bytes of every ``dist`` of a table; ``_prefix(id + 1)`` bounds the table above."""
    return _ID.pack(table_id)


def _dist(table_id: int, pk: str) -> bytes:
    return _ID.pack(table_id) + _key(pk)


def _single_partition(key_range: KeyRange) -> str | None:
    """The PartitionKey every key of the range has, if there is one: such a scan names its
    ``dist`` exactly, so Citus routes it to one shard instead of asking all of them."""
    lower, upper = key_range.lower, key_range.upper
    if lower is None or upper is None or lower.pk != upper.pk:
        return None
    if (lower.rk is None and not lower.inclusive) or (upper.rk is None and not upper.inclusive):
        return None
    return lower.pk


def _columns(table_id: int, alias: str = "") -> KeyColumns:
    """The key columns of one table: its PartitionKeys are stored behind the table's id prefix."""
    return KeyColumns(
        partition=f"{alias}dist",
        row=f"{alias}rk",
        placeholder="%s",
        partition_value=lambda pk: _dist(table_id, pk),
    )


class PostgresTables(TableStore):
    """The :class:`TableStore` contract over a :class:`PostgresDatabase`."""

    def __init__(self, database: PostgresDatabase) -> None:
        self._db = database
        self._run = database.run
        self._ids: dict[tuple[str, str], int] = {}  # (account, lower-cased name) -> table id, a hint
        self.indexes = PostgresIndexes(database)

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
            await drop_table_indexes(conn, table_id)

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
        return await self._db.account_document("service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("service_properties", account, properties)

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
            raise Restart

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
            raise Restart

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
        for key_range in ranges_to_scan(ranges, after):
            args: list[Any] = [_prefix(table_id), _prefix(table_id + 1)]
            sql = "SELECT dist, rk, ticks, props FROM entities WHERE dist >= %s AND dist < %s"
            partition = _single_partition(key_range)
            if partition is not None:
                sql += " AND dist = %s"
                args.append(_dist(table_id, partition))
            sql += range_sql(_columns(table_id), key_range, after, args)
            sql += f" AND {_TABLE_ALIVE} ORDER BY dist, rk LIMIT %s"
            args.extend((table_id, limit - len(found)))
            cursor = await conn.execute(sql, args, binary=True)
            for dist, rk, ticks, props in await cursor.fetchall():
                found.append(StoredEntity(_text(bytes(dist[8:])), _text(bytes(rk)), int(ticks), bytes(props)))
            if len(found) >= limit:
                break
        return found

    async def scan_filtered(
        self,
        account: str,
        table: str,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        examine: int,
        want: int,
        condition: Condition,
    ) -> ScanChunk:
        """The condition runs in PostgreSQL (:mod:`.pushdown`), each range in one statement
        that returns at most ``want`` rows (the page still needed, on every shard under Citus):
        rows that fail never cross the wire. The database does that work, not the event loop,
        so ``examine`` bounds only a scan that pushes nothing down. The rows examined are then
        counted with an index-only count of the same key range."""
        translation = translate(PostgresDialect(), condition)
        if translation.where is True:
            found = await self.scan(account, table, ranges, after, min(examine, want))
            last = (found[-1].pk, found[-1].rk) if found else None
            return ScanChunk(found, len(found), last, len(found) < min(examine, want), translation.exact)
        key = (account, table.lower())

        async def run(conn: Connection) -> ScanChunk:
            for _ in range(MAX_ATTEMPTS):
                table_id = await self._table_id(conn, key)
                chunk = await self._scan_filtered(conn, table_id, ranges, after, want, translation)
                if chunk.examined or await self._confirm_empty(conn, key, table_id):
                    return chunk
            raise Restart

        return await self._run(run, idempotent=True)

    async def _scan_filtered(
        self,
        conn: Connection,
        table_id: int,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        want: int,
        translation: Translation,
    ) -> ScanChunk:
        where = translation.where
        exact = translation.exact
        found: list[StoredEntity] = []
        examined = 0
        for key_range in ranges_to_scan(ranges, after):
            args: list[Any] = [_prefix(table_id), _prefix(table_id + 1)]
            within = "e.dist >= %s AND e.dist < %s"
            partition = _single_partition(key_range)
            if partition is not None:
                within += " AND e.dist = %s"
                args.append(_dist(table_id, partition))
            within += range_sql(_columns(table_id, "e."), key_range, after, args)
            within += f" AND {_TABLE_ALIVE}"
            args.append(table_id)
            if isinstance(where, Fragment):
                sql = "SELECT e.dist, e.rk, e.ticks, e.props FROM entities e"
                if translation.names:  # the JSON is read: rows it cannot be read from are kept
                    sql += f" {record_sql(translation.names)} WHERE {within} AND ({UNDECIDED} OR {where.sql})"
                else:
                    sql += f" WHERE {within} AND {where.sql}"
                sql += " ORDER BY e.dist, e.rk LIMIT %s"
                cursor = await conn.execute(sql, [*args, *where.params, want - len(found)], binary=True)
                for dist, rk, ticks, props in await cursor.fetchall():
                    blob = bytes(props)
                    exact = exact and NUL_ESCAPE not in blob
                    found.append(StoredEntity(_text(bytes(dist[8:])), _text(bytes(rk)), int(ticks), blob))
            count_sql = f"SELECT count(*) FROM entities e WHERE {within}"
            if len(found) >= want:  # stopped at a match: count the rows up to it
                last = found[-1]
                count_sql += " AND (e.dist, e.rk) <= (%s, %s)"
                args.extend((_dist(table_id, last.pk), _key(last.rk)))
                row = await (await conn.execute(count_sql, args)).fetchone()
                examined += int(row[0]) if row else 0
                return ScanChunk(found, examined, (last.pk, last.rk), False, exact)
            row = await (await conn.execute(count_sql, args)).fetchone()
            examined += int(row[0]) if row else 0
        return ScanChunk(found, examined, None, True, exact)

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
            await rollback(conn)
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

        ticks = group_ticks(state.values())
        results: list[StoredEntity | None] = []
        writes: list[tuple[int, bool, Cursor]] = []  # (index, was an insert, cursor)
        for index, mutation in enumerate(mutations):
            row_key = (_dist(table_id, mutation.pk), _key(mutation.rk))
            existing = state.get(row_key)
            try:
                check_condition(mutation, existing)
                blob = written_properties(mutation, existing)
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
                raise Restart
        return results
