"""Property indexes on SQLite: one partial expression index per (table, property).

The index is ``CREATE INDEX … ON entities ((key), pk, rk) WHERE table_id = N``, where *key* is
an expression over the stored JSON that yields the property's typed value when its type belongs
to the index's family, and NULL otherwise (see :mod:`tabulae.storage.indexes` and
:func:`key_sql`).
SQLite keeps it in every write's own transaction. A lookup of one key reads the index in
(pk, rk) order, so an ``eq`` page is a bounded index range scan with no sort.

Queries name the index (``INDEXED BY``) and repeat the exact expression and partial condition,
which SQLite requires before it will use a partial expression index. The build runs
``CREATE INDEX`` on a connection of its own in a helper thread, holding the writers' file lock:
reads go on meanwhile, writes wait for the lock (off the event loop) and then proceed, and the
index is marked ready in the same transaction that creates it.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import math
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import TableError
from tabulae.storage.indexes import (
    BUILDING,
    FAILED,
    READY,
    IndexEngine,
    IndexInfo,
    IndexProbe,
    IndexUnavailable,
    family_of,
)
from tabulae.storage.rules import KeyColumns, range_sql, ranges_to_scan
from tabulae.storage.sqlite.engine import BUSY_TIMEOUT_MS, SqliteDatabase
from tabulae.storage.sqlite.pushdown import PROPS
from tabulae.storage.tables import KeyRange, ScanChunk

SCHEMA = """
CREATE TABLE IF NOT EXISTS property_indexes (
    table_id INTEGER NOT NULL,
    property TEXT NOT NULL,
    edm_type TEXT NOT NULL,
    state TEXT NOT NULL,
    total INTEGER,
    error TEXT,
    PRIMARY KEY (table_id, property)
);
"""

_key = edm.utf16_sort_key
_text = edm.from_utf16_sort_key
_COLUMNS = KeyColumns(partition="pk", row="rk", placeholder="?", partition_value=_key)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _paths(prop: str) -> tuple[str, str]:
    """The JSON paths of the value and of its ``@odata.type`` annotation, as SQL literals."""
    name = prop.replace('"', '\\"')
    return _quote(f'$."{name}"'), _quote(f'$."{name}@odata.type"')


def _annotated(prop: str) -> str:
    """True when the stored JSON has ``"prop@odata.type":``. A byte search, exact for our stored
    form: a flat object whose names need no escapes, where a quote inside a string value is
    escaped, so the quoted name followed by a colon can only be the member name itself."""
    marker = f'"{prop}@odata.type":'.encode()
    return f"instr(props, X'{marker.hex()}') > 0"


def key_sql(family: str, prop: str) -> str:
    """The key expression of ``prop`` for an index of ``family``; NULL outside the family.

    Each JSON function call parses the stored entity again, so the common cases take one or two:
    an unannotated value (String, Int32, finite Double, Boolean) is told by the byte search of
    :func:`_annotated`. A String index keys every unannotated value (numbers and Booleans too):
    SQLite sorts numbers before text, so a lookup of text never meets them, and every candidate
    is checked by the exact filter anyway."""
    path, annotation = _paths(prop)
    annotated = _annotated(prop)
    kind = f"json_type({PROPS}, {path})"
    value = f"json_extract({PROPS}, {path})"
    typed = f"json_extract({PROPS}, {annotation})"
    if family == "string":
        return f"(CASE WHEN NOT {annotated} THEN {value} END)"
    if family == "number":
        return (
            f"(CASE WHEN NOT {annotated} THEN"
            f" CASE {kind} WHEN 'integer' THEN {value} WHEN 'real' THEN {value} END"
            f" ELSE CASE {typed} WHEN 'Edm.Int64' THEN CAST({value} AS INTEGER)"
            f" WHEN 'Edm.Double' THEN CASE {value} WHEN 'Infinity' THEN 9e999 WHEN '-Infinity' THEN -9e999"
            " END END END)"
        )
    if family == "boolean":
        return f"(CASE {kind} WHEN 'true' THEN 1 WHEN 'false' THEN 0 END)"
    if family == "datetime":
        # Stored DateTimes trim trailing fraction zeros; the key pads the fraction to 7 digits.
        fraction = (
            f"(CASE WHEN length({value}) > 20 THEN substr({value}, 21, length({value}) - 21) ELSE '' END)"
        )
        return (
            f"(CASE WHEN {annotated} AND {typed} = 'Edm.DateTime' THEN substr({value}, 1, 19)"
            f" || substr({fraction} || '0000000', 1, 7) END)"
        )
    if family == "guid":
        return f"(CASE WHEN {annotated} AND {typed} = 'Edm.Guid' THEN {value} END)"
    raise ValueError(family)


def datetime_key(ticks: int) -> str:
    """The index key of a DateTime: the stored text with the fraction padded to 7 digits."""
    seconds, fraction = divmod(ticks, edm.TICKS_PER_SECOND)
    return edm.format_datetime(seconds * edm.TICKS_PER_SECOND)[:19] + f"{fraction:07d}"


def _number_bound(value: Any, down: bool) -> float:
    """A numeric bound one ulp wider, so a rounding comparison never drops a candidate."""
    as_float = float(value)
    if math.isinf(as_float):
        return as_float
    return math.nextafter(as_float, -math.inf if down else math.inf)


def point_key(family: str, edm_type: str, value: Any) -> Any:
    """The key an ``eq`` literal is looked up under (SQLite compares INTEGER and REAL keys by
    value, so Int32 5, Int64 5 and Double 5.0 share the key 5)."""
    if family == "boolean":
        return 1 if value else 0
    if family == "datetime":
        return datetime_key(value)
    return value


def index_name(table_id: int, prop: str) -> str:
    digest = hashlib.sha1(prop.encode("utf-8")).hexdigest()[:16]
    return f"px_{table_id}_{digest}"


def _partial(table_id: int, key: str) -> str:
    """The index's condition: its table. (Not also ``key IS NOT NULL``: SQLite would compute
    the key twice per write, and each computation parses the entity's JSON.)"""
    return f"table_id = {int(table_id)}"


def create_sql(table_id: int, prop: str, edm_type: str) -> str:
    key = key_sql(family_of(edm_type), prop)
    name = index_name(table_id, prop)
    return f'CREATE INDEX IF NOT EXISTS "{name}" ON entities ({key}, pk, rk) WHERE {_partial(table_id, key)}'


# ------------------------------------------------------------------------------- write jobs


def _table_id(conn: sqlite3.Connection, account: str, table: str) -> tuple[int, str]:
    row = conn.execute(
        "SELECT id, name FROM tables WHERE account = ? AND name_key = ?", (account, table.lower())
    ).fetchone()
    if row is None:
        raise TableError("TableNotFound")
    return int(row[0]), str(row[1])


def _declare(conn: sqlite3.Connection, account: str, table: str, prop: str, edm_type: str) -> None:
    table_id, _name = _table_id(conn, account, table)
    row = conn.execute(
        "SELECT edm_type, state FROM property_indexes WHERE table_id = ? AND property = ?", (table_id, prop)
    ).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO property_indexes (table_id, property, edm_type, state) VALUES (?, ?, ?, ?)",
            (table_id, prop, edm_type, BUILDING),
        )
    elif row[0] != edm_type:
        raise TableError("IndexAlreadyExists")
    elif row[1] == FAILED:
        conn.execute(
            "UPDATE property_indexes SET state = ?, error = NULL WHERE table_id = ? AND property = ?",
            (BUILDING, table_id, prop),
        )


def _drop(conn: sqlite3.Connection, account: str, table: str, prop: str) -> None:
    table_id, _name = _table_id(conn, account, table)
    cursor = conn.execute(
        "DELETE FROM property_indexes WHERE table_id = ? AND property = ?", (table_id, prop)
    )
    if cursor.rowcount == 0:
        raise TableError("IndexNotFound")
    conn.execute(f'DROP INDEX IF EXISTS "{index_name(table_id, prop)}"')


def drop_table_indexes(conn: sqlite3.Connection, table_id: int) -> None:
    """Inside a Delete Table: its indexes go with it, in the same transaction."""
    rows = conn.execute("SELECT property FROM property_indexes WHERE table_id = ?", (table_id,)).fetchall()
    for (prop,) in rows:
        conn.execute(f'DROP INDEX IF EXISTS "{index_name(table_id, prop)}"')
    conn.execute("DELETE FROM property_indexes WHERE table_id = ?", (table_id,))


def _build(path: str, lock_path: str, table_id: int, prop: str, edm_type: str) -> tuple[str, str | None]:
    """Create the index and mark it ready in one transaction, under the writers' file lock
    (its own descriptor: flock locks belong to an open file). Runs on a helper thread."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    fd = os.open(lock_path, os.O_RDWR)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous = FULL")
        total = conn.execute("SELECT count(*) FROM entities WHERE table_id = ?", (table_id,)).fetchone()[0]
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT edm_type FROM property_indexes WHERE table_id = ? AND property = ?",
                    (table_id, prop),
                ).fetchone()
                if row is None or row[0] != edm_type:
                    conn.execute("ROLLBACK")
                    return "gone", None
                conn.execute(create_sql(table_id, prop, edm_type))
                conn.execute(
                    "UPDATE property_indexes SET state = ?, total = ?, error = NULL"
                    " WHERE table_id = ? AND property = ?",
                    (READY, total, table_id, prop),
                )
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.execute(
                    "UPDATE property_indexes SET state = ?, error = ? WHERE table_id = ? AND property = ?",
                    (FAILED, str(exc), table_id, prop),
                )
                return FAILED, str(exc)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return READY, None
    finally:
        os.close(fd)
        conn.close()


# --------------------------------------------------------------------------------- the store


class SqliteIndexes(IndexEngine):
    """Index declarations, builds and lookups for :class:`~tabulae.storage.sqlite.tables.SqliteTables`."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database
        self._lock_path = str(Path(database.path).with_name("tabulae.lock"))
        self._builds: dict[tuple[int, str], asyncio.Future[tuple[str, str | None]]] = {}

    def _reader_table(self, account: str, table: str) -> tuple[int, str]:
        return _table_id(self._db.reader, account, table)

    async def create(self, account: str, table: str, prop: str, edm_type: str) -> IndexInfo:
        family_of(edm_type)
        await self._db.write(_declare, account, table, prop, edm_type)
        return await self._info(account, table, prop)

    async def build(self, account: str, table: str, prop: str) -> IndexInfo:
        table_id, _name = self._reader_table(account, table)
        row = self._db.reader.execute(
            "SELECT edm_type, state FROM property_indexes WHERE table_id = ? AND property = ?",
            (table_id, prop),
        ).fetchone()
        if row is None:
            raise TableError("IndexNotFound")
        if row[1] != READY:
            key = (table_id, prop)
            future = self._builds.get(key)
            if future is None:
                loop = asyncio.get_running_loop()
                future = loop.run_in_executor(
                    None, _build, self._db.path, self._lock_path, table_id, prop, str(row[0])
                )
                self._builds[key] = future
                future.add_done_callback(lambda _f: self._builds.pop(key, None))
            await asyncio.shield(future)
        return await self._info(account, table, prop)

    async def _info(self, account: str, table: str, prop: str) -> IndexInfo:
        for info in await self.listing(account, table):
            if info.property == prop:
                return info
        raise TableError("IndexNotFound")

    async def listing(self, account: str, table: str | None) -> list[IndexInfo]:
        sql = (
            "SELECT t.id, t.name, i.property, i.edm_type, i.state, i.total, i.error"
            " FROM tables t JOIN property_indexes i ON i.table_id = t.id WHERE t.account = ?"
        )
        args: list[Any] = [account]
        if table is not None:
            self._reader_table(account, table)
            sql += " AND t.name_key = ?"
            args.append(table.lower())
        rows = self._db.reader.execute(sql + " ORDER BY t.name_key, i.property", args).fetchall()
        return [
            IndexInfo(name, prop, edm_type, state, total if state == READY else None, total, error)
            for _id, name, prop, edm_type, state, total, error in rows
        ]

    async def drop(self, account: str, table: str, prop: str) -> None:
        await self._db.write(_drop, account, table, prop)

    async def ready(self, account: str, table: str) -> dict[str, str]:
        rows = self._db.reader.execute(
            "SELECT i.property, i.edm_type FROM tables t JOIN property_indexes i ON i.table_id = t.id"
            " WHERE t.account = ? AND t.name_key = ? AND i.state = ?",
            (account, table.lower(), READY),
        ).fetchall()
        return {str(prop): str(edm_type) for prop, edm_type in rows}

    # ---------------------------------------------------------------------------- lookups

    def _index(self, account: str, table: str, probe: IndexProbe) -> tuple[int, str, str]:
        """(table id, index name, key expression), checking the index is ready for the probe."""
        table_id, _name = self._reader_table(account, table)
        row = self._db.reader.execute(
            "SELECT edm_type, state FROM property_indexes WHERE table_id = ? AND property = ?",
            (table_id, probe.property),
        ).fetchone()
        if row is None or row[1] != READY or family_of(row[0]) != family_of(probe.index_type):
            raise IndexUnavailable(probe.property)
        family = family_of(probe.index_type)
        return table_id, index_name(table_id, probe.property), key_sql(family, probe.property)

    def _conditions(self, family: str, probe: IndexProbe, key: str) -> list[tuple[str, list[Any]]]:
        """One SQL condition per point (each a key-ordered stream), or one for the range."""
        if probe.points:
            keys = {point_key(family, t, v) for t, v in probe.points}
            return [(f"{key} = ?", [k]) for k in sorted(keys, key=repr)]
        sql, args = f"{key} IS NOT NULL", []
        if probe.lower is not None:
            sql += f" AND {key} >= ?"
            args.append(self._bound(family, probe.lower, down=True))
        if probe.upper is not None:
            sql += f" AND {key} <= ?"
            args.append(self._bound(family, probe.upper, down=False))
        return [(sql, args)]

    @staticmethod
    def _bound(family: str, bound: tuple[str, Any], down: bool) -> Any:
        if family == "number":
            return _number_bound(bound[1], down)
        return point_key(family, bound[0], bound[1])

    def _run(self, sql: str, args: list[Any]) -> list[Any]:
        try:
            return self._db.reader.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such index" in str(exc) or "no query solution" in str(exc):
                raise IndexUnavailable(str(exc)) from exc
            raise

    async def scan(
        self,
        account: str,
        table: str,
        probe: IndexProbe,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> ScanChunk:
        table_id, name, key = self._index(account, table, probe)
        family = family_of(probe.index_type)
        found: list[tuple[bytes, bytes, int, bytes]] = []
        for key_range in ranges_to_scan(ranges, after):
            need = limit - len(found)
            if need <= 0:
                break
            batch: list[tuple[bytes, bytes, int, bytes]] = []
            for condition, condition_args in self._conditions(family, probe, key):
                args: list[Any] = [*condition_args]
                sql = (
                    f'SELECT pk, rk, ticks, props FROM entities INDEXED BY "{name}"'
                    f" WHERE {_partial(table_id, key)} AND {condition}"
                )
                sql += range_sql(_COLUMNS, key_range, after, args)
                sql += " ORDER BY pk, rk LIMIT ?"
                args.append(need)
                batch.extend(self._run(sql, args))
            batch.sort(key=lambda row: (row[0], row[1]))
            found.extend(batch[:need])
        rows: list[StoredEntity] = [
            StoredEntity(_text(pk), _text(rk), ticks, props) for pk, rk, ticks, props in found
        ]
        last = (_text(found[-1][0]), _text(found[-1][1])) if found else None
        return ScanChunk(rows, len(rows), last, len(rows) < limit, False)

    async def count(
        self, account: str, table: str, probe: IndexProbe, ranges: Sequence[KeyRange], cap: int
    ) -> int:
        table_id, name, key = self._index(account, table, probe)
        family = family_of(probe.index_type)
        total = 0
        for condition, condition_args in self._conditions(family, probe, key):
            sql = (
                f'SELECT count(*) FROM (SELECT 1 FROM entities INDEXED BY "{name}"'
                f" WHERE {_partial(table_id, key)} AND {condition} LIMIT ?)"
            )
            total += int(self._run(sql, [*condition_args, cap - total])[0][0])
            if total >= cap:
                break
        return total
