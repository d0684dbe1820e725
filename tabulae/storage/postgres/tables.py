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
whatever the size of its group, and a read one; inserts of one partition and a point delete,
which need not read first, cost one. Front-ends cache table name -> id as a hint
only: every statement that uses a cached id checks it, and a miss looks the name up again.
Rows come back in binary format, so ``bytea`` is not hex-encoded on the wire.
"""

from __future__ import annotations

import functools
import secrets
import struct
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pg_errors

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.plan import Plan
from tabulae.storage.postgres import partition_scan, planned, wire
from tabulae.storage.postgres.citus_scans import ScanHints, scan_stepping
from tabulae.storage.postgres.engine import PostgresDatabase, Restart, Schema, rollback
from tabulae.storage.postgres.gathered import Gathered
from tabulae.storage.postgres.indexes import PostgresIndexes
from tabulae.storage.postgres.pushdown import NUL_ESCAPE, UNDECIDED, PostgresDialect, record_sql
from tabulae.storage.pushdown import Fragment, Translation
from tabulae.storage.rules import decide, group_ticks, written
from tabulae.storage.scans import KeyRange, ScanChunk
from tabulae.storage.table_plans import EntityLayout, Matching, PlannedTables, TableIds, named, scan_rows

if TYPE_CHECKING:
    from tabulae.storage.postgres.engine import Connection, Cursor

T = TypeVar("T")

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
    # Moved on after every committed write that may have made a partition (Citus only): a dense
    # scan that finds it unmoved since its last probe knows no partition appeared
    # (:mod:`.citus_scans`). A sequence, so moving it takes no lock; it stays on the coordinator.
    "CREATE SEQUENCE IF NOT EXISTS entity_partition_epoch",
)
SCHEMA = Schema(_STATEMENTS, reference=("tables", "service_properties"), distributed={"entities": "dist"})

MAX_TABLE_ID = 2**63 - 2  # ids are 1..2**63-2, so "id + 1" (the table's upper bound) fits 8 bytes

_ID = struct.Struct(">q")

_LOOKUP = "SELECT id FROM tables WHERE account = %s AND name_key = %s"
_LOCK = "SELECT rk, ticks, props FROM entities WHERE dist = %s AND rk = ANY(%s) ORDER BY rk FOR UPDATE"
_INSERT = (
    "INSERT INTO entities (dist, rk, ticks, props) VALUES (%s, %s, %s, %s) ON CONFLICT (dist, rk) DO NOTHING"
)
_UPDATE = "UPDATE entities SET ticks = %s, props = %s WHERE dist = %s AND rk = %s AND ticks = %s"
_DELETE = "DELETE FROM entities WHERE dist = %s AND rk = %s AND ticks = %s"


# what point reads and inserts send through libpq directly (:mod:`.wire`)
_POINT = wire.Statement.of(
    "SELECT ticks, props FROM entities WHERE dist = $1 AND rk = $2"
    " AND EXISTS (SELECT 1 FROM tables WHERE id = $3)",
    wire.BYTEA,
    wire.BYTEA,
    wire.INT8,
)
_BEGIN = wire.Statement.of("BEGIN")
_COMMIT = wire.Statement.of("COMMIT")
# the table still exists (ids are never reused), or a division by zero fails the transaction
_TABLE_CHECK = wire.Statement.of("SELECT 1 / count(*) FROM tables WHERE id = $1", wire.INT8)
# after the COMMIT of a write that inserted, on Citus: the partition epoch moves on
_EPOCH_BUMP_SQL = "SELECT nextval('entity_partition_epoch')"
_EPOCH_BUMP = wire.Statement.of(_EPOCH_BUMP_SQL)


# a point delete: of whatever version is stored (If-Match *), or of the version an ETag names
_DELETE_ANY = wire.Statement.of("DELETE FROM entities WHERE dist = $1 AND rk = $2", wire.BYTEA, wire.BYTEA)
_DELETE_VERSION = wire.Statement.of(
    "DELETE FROM entities WHERE dist = $1 AND rk = $2 AND ticks = $3", wire.BYTEA, wire.BYTEA, wire.INT8
)
_ETAG_HEAD, _ETAG_TAIL = "W/\"datetime'", "'\""


def _etag_ticks(etag: str) -> int | None:
    """The ticks of the version ``etag`` names when it is exactly the ETag the service gives that
    version (so comparing ticks in SQL is comparing the ETag's text, as the rules do); else None."""
    if not (etag.startswith(_ETAG_HEAD) and etag.endswith(_ETAG_TAIL)):
        return None
    ticks = edm.parse_datetime(etag[len(_ETAG_HEAD) : -len(_ETAG_TAIL)].replace("%3A", ":"))
    if ticks is None or ticks < 0 or edm.etag_of_ticks(ticks) != etag:
        return None
    return ticks


@functools.cache
def _inserts(count: int) -> wire.Statement:
    """``count`` rows of one partition in one ``INSERT`` (Citus routes it to the partition's
    shard); a key already present fails it, and the transaction with it."""
    rows = ", ".join(f"($1, ${3 + 2 * i}, $2, ${4 + 2 * i})" for i in range(count))
    return wire.Statement.of(
        f"INSERT INTO entities (dist, rk, ticks, props) VALUES {rows}",
        wire.BYTEA,
        wire.INT8,
        *(wire.BYTEA, wire.BYTEA) * count,
    )


_key = edm.utf16_sort_key
_text = edm.from_utf16_sort_key


def _dist(table_id: int, pk: str) -> bytes:
    return _ID.pack(table_id) + _key(pk)


class PostgresLayout(EntityLayout):
    """Entities keyed by ``(dist, rk)``; every read checks its table still exists."""

    partition = "dist"
    point = "dist = :part AND rk = :rk"
    alive = " AND EXISTS (SELECT 1 FROM tables WHERE id = :tid)"
    index_drop = "DROP INDEX CONCURRENTLY IF EXISTS {name}"
    indexes_in_transaction = False  # DROP INDEX CONCURRENTLY runs outside a transaction

    def new_table_id(self) -> int:
        return secrets.randbelow(MAX_TABLE_ID) + 1

    def table_where(self, table_id: int, params: dict[str, Any], alias: str = "") -> str:
        """The table's ``dist`` range: its id's 8 bytes up to the next id's."""
        params.update(lo=_ID.pack(table_id), hi=_ID.pack(table_id + 1))
        return f"{alias}dist >= :lo AND {alias}dist < :hi"

    def partition_value(self, table_id: int, pk: str) -> bytes:
        return _dist(table_id, pk)

    def route(self, table_id: int, key_range: KeyRange, params: dict[str, Any], alias: str = "") -> str:
        """A range within one PartitionKey names its ``dist`` exactly, so Citus routes the scan
        to one shard instead of asking all of them."""
        lower, upper = key_range.lower, key_range.upper
        if lower is None or upper is None or lower.pk != upper.pk:
            return ""
        if (lower.rk is None and not lower.inclusive) or (upper.rk is None and not upper.inclusive):
            return ""
        params["route"] = _dist(table_id, lower.pk)
        return f" AND {alias}dist = :route"

    def entities(self, rows: Iterable[Sequence[Any]]) -> list[StoredEntity]:
        """The rows' entities. Rows come in key order, so neighbours usually share their
        partition: its key is decoded once per run of rows, not once per row."""
        found = []
        last, pk = None, ""
        for dist, rk, ticks, props in rows:
            if dist != last:
                last, pk = dist, _text(bytes(dist[8:]))
            found.append(StoredEntity(pk, _text(bytes(rk)), int(ticks), bytes(props)))
        return found

    def key(self, row: Sequence[Any]) -> tuple[str, str]:
        return _text(bytes(row[0][8:])), _text(bytes(row[1]))


def _decided(blob: bytes) -> bool:
    """A row SQL could read (a stored U+0000 escape makes PostgreSQL refuse the JSON)."""
    return NUL_ESCAPE not in blob


class PostgresTables(PlannedTables):
    """The :class:`TableStore` contract over a :class:`PostgresDatabase`: the plans of
    :mod:`tabulae.storage.table_plans`, and PostgreSQL's own pipelined writes."""

    def __init__(
        self,
        database: PostgresDatabase,
        *,
        citus: bool = False,
        wide_probes: bool = True,
        partition_epoch: bool = False,
    ) -> None:
        """``partition_epoch`` (Citus, with ``entity_partition_epoch`` in the schema): every write
        that inserts moves the epoch on after its commit, and dense scans trust what a probe
        found while the epoch stays (:mod:`.citus_scans`)."""
        layout = PostgresLayout()
        super().__init__(layout, TableIds(), PostgresDialect())
        self._db = database
        self._gathered = Gathered(database)  # point and one-partition reads, per loop turn
        self._citus = citus
        self._epoch = citus and partition_epoch
        self._scan_hints = ScanHints(
            wide_probes=wide_probes, epochs=self._epoch
        )  # where dense Citus scans go next (:mod:`.citus_scans`)
        self.indexes = PostgresIndexes(database, layout)

    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        return await planned.read(self._db, make)

    async def _write(self, make: Callable[[], Plan[T]], transaction: bool = True) -> T:
        return await planned.write(self._db, make, transaction=transaction)

    async def _read_long(self, make: Callable[[], Plan[T]], resumed: bool) -> T:
        """On Citus a filtered scan runs in pipeline mode: a probe's ``BEGIN`` and ``SET LOCAL``
        go with it and its ``COMMIT`` with the next read (:mod:`.citus_scans`), one round trip
        where there were four."""
        if self._citus:
            return await planned.read_pipelined(self._db, make)
        return await self._read(make)

    def _matching(self, where: Fragment | bool, translation: Translation) -> Matching:
        """Each range in one statement returning at most the rows the page still needs (on
        every shard under Citus), with no window: the database does that work, not the event
        loop. Rows whose JSON SQL cannot read are kept for the exact filter."""
        if isinstance(where, bool):
            return Matching("entities e", "", {}, translation.exact)
        condition, params = named(where.sql, where.params, "%s")
        if translation.names:  # the JSON is read: rows it cannot be read from are kept
            source, condition = f"entities e {record_sql(translation.names)}", f"({UNDECIDED} OR {condition})"
        else:
            source = "entities e"
        return Matching(source, condition, params, translation.exact, _decided)

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity | None:
        """With the table's id remembered, one prepared statement, sent with the loop turn's
        other reads (:mod:`.gathered`); otherwise (and to tell a missing entity from a stale id)
        the plan."""
        table_id = self._ids.get((account, table.lower()))
        if table_id is not None:
            result = await self._gathered.run((_POINT, (_dist(table_id, pk), _key(rk), wire.int8(table_id))))
            if result.ntuples:
                return StoredEntity(
                    pk, rk, wire.read_int8(result.get_value(0, 0)), bytes(result.get_value(0, 1))
                )
        return await super().get_entity(account, table, pk, rk)

    async def scan(
        self,
        account: str,
        table: str,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[StoredEntity]:
        """With the table's id remembered, through libpq directly: a range within one partition
        in a statement of its own (:mod:`.partition_scan`, sent with the loop turn's other such
        reads, :mod:`.gathered`), others in the plan's statements. When
        they find nothing (or do not fit), the plan as usual, which also confirms the id."""
        table_id = self._ids.get((account, table.lower()))
        if table_id is not None:
            within = partition_scan.call(table_id, ranges, after, limit)
            found: list[StoredEntity] | None
            if within is not None:
                found = partition_scan.entities(await self._gathered.run(within[0]), within[1])
            else:
                make = partial(scan_rows, self._layout, table_id, ranges, after, limit)

                async def run(conn: Connection) -> list[StoredEntity] | None:
                    try:
                        return await wire.run_read(conn, make())
                    except wire.Unsupported:
                        return None

                found = await self._db.run(run, idempotent=True)
            if found:
                return found
        return await super().scan(account, table, ranges, after, limit)

    def _scan_matching(
        self,
        table: int,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        want: int,
        matching: Matching,
        window: int | None,
    ) -> Plan[ScanChunk]:
        """On Citus a filtered scan steps through partitions while matches are dense
        (:mod:`.citus_scans`): one statement over every shard would read each shard's fill."""
        if self._citus and matching.condition and window is None:
            return scan_stepping(self._layout, table, ranges, after, want, matching, self._scan_hints)
        return super()._scan_matching(table, ranges, after, want, matching, window)

    async def get_service_properties(self, account: str) -> bytes | None:
        return await self._db.account_document("service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("service_properties", account, properties)

    # ----------------------------------------------------------------------------- writes

    async def apply(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        """An atomic group, each try in three pipelined round trips.

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
        key = (account, table.lower())
        group = tuple(mutations)
        cached = self._ids.get(key)
        if cached is not None and all(m.kind is MutationKind.INSERT for m in group):
            inserted = await self._insert(cached, group)
            if inserted is not None:
                return inserted
        elif (
            cached is not None
            and len(group) == 1
            and group[0].kind is MutationKind.DELETE
            and await self._delete(cached, group[0])
        ):
            return [None]

        async def run(conn: Connection) -> list[StoredEntity | None]:
            try:
                async with conn.pipeline() as pipeline:
                    await conn.execute("BEGIN")
                    results, inserted = await self._apply_in_transaction(conn, pipeline, key, group)
                    await conn.execute("COMMIT")
                    if inserted and self._epoch:
                        await conn.execute(_EPOCH_BUMP_SQL)
            except BaseException:
                await rollback(conn)
                raise
            return results

        return await self._db.run(run, retry=True)

    async def _insert(self, table_id: int, group: tuple[Mutation, ...]) -> list[StoredEntity | None] | None:
        """Inserts of one partition (a point insert, a batch of inserts) in one round trip:
        nothing is read first, as the keys must be missing. The table's check and the
        ``INSERT`` share a transaction, so a key that is present or a table that is gone leaves
        nothing behind; then None says to take the general path, which finds out which it was
        (and the operation at fault)."""
        pks = {m.pk for m in group}
        if len(pks) != 1:
            return None
        ticks = group_ticks(())
        keys = [_key(m.rk) for m in group]
        decisions = decide(group, keys, {}, ticks)  # the encoded entities; nothing is stored yet
        params: list[bytes | None] = [_dist(table_id, group[0].pk), wire.int8(ticks)]
        for rk, (_existing, blob) in zip(keys, decisions, strict=True):
            params += (rk, blob)
        calls: tuple[wire.Call, ...] = (
            (_BEGIN, ()),
            (_TABLE_CHECK, (wire.int8(table_id),)),
            (_inserts(len(group)), params),
            (_COMMIT, ()),
        )
        if self._epoch:
            # after the COMMIT, in the same round trip: a statement found unprepared there cannot
            # be the first (BEGIN is), so the exchange's resend never repeats a committed insert
            calls = (*calls, (_EPOCH_BUMP, ()))

        async def run(conn: Connection) -> bool:
            try:
                await wire.exchange(conn, calls)
            except (pg_errors.UniqueViolation, pg_errors.DivisionByZero):
                await rollback(conn)
                return False
            except BaseException:
                await rollback(conn)
                raise
            return True

        if not await self._db.run(run, retry=True):
            return None
        return written(group, (blob for _existing, blob in decisions), ticks)

    async def _delete(self, table_id: int, mutation: Mutation) -> bool:
        """A point delete in one round trip: the table's check and a ``DELETE`` conditional on the
        ETag, in one transaction. True when it deleted the entity; else nothing changed (the
        entity is missing, its ETag differs, the table is gone, or the ETag is not one this
        service gives) and the general path finds out which, to answer as the rules say."""
        params: list[bytes | None] = [_dist(table_id, mutation.pk), _key(mutation.rk)]
        if mutation.if_match in (None, "*"):
            delete = _DELETE_ANY
        else:
            ticks = _etag_ticks(mutation.if_match)
            if ticks is None:
                return False
            delete, params = _DELETE_VERSION, [*params, wire.int8(ticks)]
        calls = ((_BEGIN, ()), (_TABLE_CHECK, (wire.int8(table_id),)), (delete, params), (_COMMIT, ()))

        async def run(conn: Connection) -> bool:
            try:
                results = await wire.exchange(conn, calls)
            except pg_errors.DivisionByZero:
                await rollback(conn)
                return False
            except BaseException:
                await rollback(conn)
                raise
            return results[2].command_tuples == 1

        return await self._db.run(run, retry=True)

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

    async def _apply_in_transaction(
        self,
        conn: Connection,
        pipeline: psycopg.AsyncPipeline,
        key: tuple[str, str],
        mutations: tuple[Mutation, ...],
    ) -> tuple[list[StoredEntity | None], bool]:
        """The group's results, and whether it inserted an entity (and may so have made a
        partition)."""
        cached = self._ids.get(key)
        lookup = await conn.execute(_LOOKUP, key)
        locks = await self._lock(conn, cached, mutations) if cached is not None else []
        row = await lookup.fetchone()
        table_id = int(row[0]) if row else None
        self._ids.remember(key, table_id)
        if table_id is None:
            raise ServiceError("TableNotFound")
        if table_id != cached:
            locks = await self._lock(conn, table_id, mutations)
        state: dict[Any, tuple[int, bytes] | None] = {}
        partitions = sorted({m.pk for m in mutations}, key=edm.utf16_sort_key)
        for cursor, pk in zip(locks, partitions, strict=True):
            for rk, ticks, props in await cursor.fetchall():
                state[(pk, bytes(rk))] = (int(ticks), bytes(props))
        ticks = group_ticks(state.values())
        keys = [(mutation.pk, _key(mutation.rk)) for mutation in mutations]
        decisions = decide(mutations, keys, state, ticks)
        writes: list[tuple[int, bool, Cursor]] = []  # (index, was an insert, cursor)
        for index, ((pk, rk), (existing, blob)) in enumerate(zip(keys, decisions, strict=True)):
            row_key = (_dist(table_id, pk), rk)
            if blob is None:
                assert existing is not None  # a delete needs the entity
                cursor = await conn.execute(_DELETE, (*row_key, existing[0]))
            elif existing is None:
                cursor = await conn.execute(_INSERT, (*row_key, ticks, blob))
            else:
                cursor = await conn.execute(_UPDATE, (ticks, blob, *row_key, existing[0]))
            writes.append((index, existing is None, cursor))

        await pipeline.sync()
        for index, inserted, cursor in writes:
            if cursor.rowcount != 1:
                if inserted and mutations[index].kind is MutationKind.INSERT:
                    raise ServiceError("EntityAlreadyExists").at(index)
                raise Restart
        inserted_any = any(inserted for _index, inserted, _cursor in writes)
        return written(mutations, (blob for _existing, blob in decisions), ticks), inserted_any
