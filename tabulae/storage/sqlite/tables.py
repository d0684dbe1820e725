"""The Table store on SQLite: tables and entities in the engine's database.

Keys are stored as UTF-16BE blobs, whose byte order is the service's ordinal UTF-16 order, so
the clustered primary key ``(table_id, pk, rk)`` of a WITHOUT ROWID table is the service's key
order and every range scan is an index range scan. Writes are jobs for the engine's group-commit
writer; reads run on its reader connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from tabulae.model import edm
from tabulae.model.entity import StoredEntity, encode_properties
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.plan import Plan, run_sync
from tabulae.storage.pushdown import Fragment, Translation
from tabulae.storage.rules import decide, group_ticks, written
from tabulae.storage.sqlite import planned
from tabulae.storage.sqlite.engine import SqliteDatabase
from tabulae.storage.sqlite.indexes import SCHEMA as INDEXES_SCHEMA
from tabulae.storage.sqlite.indexes import SqliteIndexes
from tabulae.storage.sqlite.pushdown import SqliteDialect
from tabulae.storage.table_plans import EntityLayout, Matching, PlannedTables, TableIds, named, table_id

T = TypeVar("T")

_key = edm.utf16_sort_key

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS tables (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    name_key TEXT NOT NULL,
    name TEXT NOT NULL,
    acl BLOB,
    UNIQUE (account, name_key)
);
CREATE TABLE IF NOT EXISTS service_properties (
    account TEXT PRIMARY KEY,
    properties BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS entities (
    table_id INTEGER NOT NULL,
    pk BLOB NOT NULL,
    rk BLOB NOT NULL,
    ticks INTEGER NOT NULL,
    props BLOB NOT NULL,
    PRIMARY KEY (table_id, pk, rk)
) WITHOUT ROWID;
"""
    + INDEXES_SCHEMA
)


class SqliteTables(PlannedTables):
    """The :class:`TableStore` contract over a :class:`SqliteDatabase`: the plans of
    :mod:`tabulae.storage.table_plans`, and SQLite's own point read, filtered scan and writes."""

    def __init__(self, database: SqliteDatabase) -> None:
        layout = EntityLayout()
        super().__init__(layout, TableIds(limit=0), SqliteDialect())  # lookups are local: none kept
        self._db = database
        self.indexes = SqliteIndexes(database, layout)

    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        return planned.read(self._db, make)

    async def _write(self, make: Callable[[], Plan[T]], transaction: bool = True) -> T:
        return await planned.write(self._db, make, savepoint=transaction)

    async def get_service_properties(self, account: str) -> bytes | None:
        return self._db.account_document("service_properties", account)

    async def set_service_properties(self, account: str, properties: bytes) -> None:
        await self._db.set_account_document("service_properties", account, properties)

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity | None:
        """The hottest path of all, kept off the plan: one statement joining the table's row,
        where the plan looks the table up first and runs through a generator, which measured
        16% more instructions per point read (benchmarks/README.md, issue 30)."""
        row = self._db.reader.execute(
            "SELECT e.ticks, e.props FROM tables t JOIN entities e ON e.table_id = t.id"
            " WHERE t.account = ? AND t.name_key = ? AND e.pk = ? AND e.rk = ?",
            (account, table.lower(), _key(pk), _key(rk)),
        ).fetchone()
        if row is None:
            planned.read(self._db, partial(table_id, self._ids, account, table))  # or TableNotFound
            return None
        return StoredEntity(pk, rk, row[0], row[1])

    window = True  # reads run on the event loop: one call examines at most ``examine`` rows

    def _matching(self, where: Fragment | bool, translation: Translation) -> Matching:
        if isinstance(where, bool):
            return Matching("entities e", "", {}, translation.exact)
        return Matching("entities e", *named(where.sql, where.params, "?"), translation.exact)

    async def _read_long(self, make: Callable[[], Plan[T]], resumed: bool) -> T:
        """A scan that continues reads through the engine's memory-mapped scan reader (less CPU
        per row, see :mod:`.mapped_reader`); a query that ends in its first window never opens it."""
        mapped = self._db.scan_reader
        reader = mapped.connection() if resumed or mapped.is_open else self._db.reader
        return run_sync(make(), reader, planned.DIALECT)

    async def apply(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        # One mutation is at most one write statement: it needs no savepoint of its own.
        result: list[StoredEntity | None] = await self._db.write(
            _apply, account, table, tuple(mutations), savepoint=len(mutations) > 1
        )
        return result


# --------------------------------------------------------------------------------- write jobs
# These run on the event loop's thread inside the group's transaction (and a savepoint, where asked).


def _writer_table_id(conn: sqlite3.Connection, account: str, table: str) -> int | None:
    row = conn.execute(
        "SELECT id FROM tables WHERE account = ? AND name_key = ?", (account, table.lower())
    ).fetchone()
    return int(row[0]) if row else None


_INSERT_SQL = "INSERT INTO entities (table_id, pk, rk, ticks, props) VALUES (?, ?, ?, ?, ?)"
_REPLACE_SQL = "INSERT OR REPLACE INTO entities (table_id, pk, rk, ticks, props) VALUES (?, ?, ?, ?, ?)"
_DELETE_SQL = "DELETE FROM entities WHERE table_id = ? AND pk = ? AND rk = ?"
_READ_SQL = "SELECT ticks, props FROM entities WHERE table_id = ? AND pk = ? AND rk = ?"


def _apply(
    conn: sqlite3.Connection, account: str, table: str, mutations: tuple[Mutation, ...]
) -> list[StoredEntity | None]:
    table_id = _writer_table_id(conn, account, table)
    if table_id is None:
        raise ServiceError("TableNotFound")
    if all(mutation.kind is MutationKind.INSERT for mutation in mutations):
        return _insert_all(conn, table_id, mutations)
    current = _current_rows(conn, table_id, mutations)
    ticks = group_ticks(current)
    keys = [(mutation.pk, mutation.rk) for mutation in mutations]
    decisions = decide(mutations, keys, dict(zip(keys, current, strict=True)), ticks)
    rows = [
        (_key(mutation.pk), _key(mutation.rk), blob)
        for mutation, (_existing, blob) in zip(mutations, decisions, strict=True)
    ]
    if len(set(keys)) == len(keys):  # distinct keys: order does not matter, one statement a kind
        if deletes := [(table_id, pk, rk) for pk, rk, blob in rows if blob is None]:
            conn.executemany(_DELETE_SQL, deletes)
        if writes := [(table_id, pk, rk, ticks, blob) for pk, rk, blob in rows if blob is not None]:
            conn.executemany(_REPLACE_SQL, writes)
    else:  # one by one, in order
        for pk, rk, blob in rows:
            if blob is None:
                conn.execute(_DELETE_SQL, (table_id, pk, rk))
            else:
                conn.execute(_REPLACE_SQL, (table_id, pk, rk, ticks, blob))
    return written(mutations, (blob for _row, blob in decisions), ticks)


def _current_rows(
    conn: sqlite3.Connection, table_id: int, mutations: tuple[Mutation, ...]
) -> list[tuple[int, bytes] | None]:
    """The stored (ticks, props) of each mutation's entity: one query for a group in one
    partition (an entity group transaction), one per entity otherwise."""
    partition = mutations[0].pk
    if len(mutations) == 1 or any(mutation.pk != partition for mutation in mutations):
        rows = []
        for mutation in mutations:
            row = conn.execute(_READ_SQL, (table_id, _key(mutation.pk), _key(mutation.rk))).fetchone()
            rows.append((row[0], row[1]) if row else None)
        return rows
    keys = [_key(mutation.rk) for mutation in mutations]
    marks = ",".join("?" * len(keys))
    found = {
        bytes(rk): (ticks, props)
        for rk, ticks, props in conn.execute(
            f"SELECT rk, ticks, props FROM entities WHERE table_id = ? AND pk = ? AND rk IN ({marks})",
            (table_id, _key(partition), *keys),
        )
    }
    return [found.get(key) for key in keys]


def _insert_all(
    conn: sqlite3.Connection, table_id: int, mutations: tuple[Mutation, ...]
) -> list[StoredEntity | None]:
    """Inserts only (the common batch): one statement for all rows, no reads first. The primary
    key finds a clash, and the rows inserted before it tell which operation clashed; the job's
    savepoint then undoes them."""
    ticks = edm.now_ticks()
    partition = mutations[0].pk  # a group's rows usually share one PartitionKey: encoded once
    partition_key = _key(partition)
    rows = []
    stored: list[StoredEntity | None] = []
    for mutation in mutations:
        blob = encode_properties(mutation.properties or {})
        pk = partition_key if mutation.pk == partition else _key(mutation.pk)
        rows.append((table_id, pk, _key(mutation.rk), ticks, blob))
        stored.append(StoredEntity(mutation.pk, mutation.rk, ticks, blob))
    before = conn.total_changes
    try:
        conn.executemany(_INSERT_SQL, rows)
    except sqlite3.IntegrityError:
        raise ServiceError("EntityAlreadyExists").at(conn.total_changes - before) from None
    return stored
