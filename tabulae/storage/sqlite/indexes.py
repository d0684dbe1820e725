"""Property indexes on SQLite: one partial expression index per (table, property).

The index is ``CREATE INDEX … ON entities ((key), pk, rk) WHERE table_id = N``, where *key* is
an expression over the stored JSON that yields the property's typed value when its type belongs
to the index's family, and NULL otherwise (see :mod:`tabulae.storage.indexes` and
:func:`key_sql`).
SQLite keeps it in every write's own transaction. A lookup of one key reads the index in
(pk, rk) order, so an ``eq`` page is a bounded index range scan with no sort.

Lookups (:mod:`..index_plans`) name the index (``INDEXED BY``) and repeat the exact expression
and partial condition, which SQLite requires before it will use a partial expression index. The build runs
``CREATE INDEX`` on a connection of its own in a helper thread, holding the writers' file lock:
reads go on meanwhile, writes wait for the lock (off the event loop) and then proceed, and the
index is marked ready in the same transaction that creates it.
"""

from __future__ import annotations

import asyncio
import fcntl
import math
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tabulae.model import edm
from tabulae.model.indexes import FAILED, READY, family_of
from tabulae.storage.index_plans import IndexSql, PlannedIndexes
from tabulae.storage.indexes import IndexUnavailable
from tabulae.storage.plan import Plan
from tabulae.storage.sqlite import planned
from tabulae.storage.sqlite.engine import BUSY_TIMEOUT_MS, SqliteDatabase
from tabulae.storage.sqlite.pushdown import PROPS
from tabulae.storage.table_plans import EntityLayout, index_name

T = TypeVar("T")

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


class SqliteIndexSql(IndexSql):
    """Keys are SQLite values (INTEGER and REAL compare by value, so Int32 5, Int64 5 and Double
    5.0 share the key 5); a lookup names its index, which SQLite needs for a partial one."""

    def key_sql(self, family: str, prop: str) -> str:
        return key_sql(family, prop)

    def partial(self, table: int) -> str:
        """The index's condition: its table. (Not also ``key IS NOT NULL``: SQLite would compute
        the key twice per write, and each computation parses the entity's JSON.)"""
        return f"table_id = {int(table)}"

    def source(self, name: str) -> str:
        return f'entities INDEXED BY "{name}"'

    def point_keys(self, family: str, edm_type: str, value: Any) -> list[Any]:
        if family == "boolean":
            return [1 if value else 0]
        return [datetime_key(value) if family == "datetime" else value]

    def bound_key(self, family: str, bound: tuple[str, Any], down: bool) -> Any:
        """Numbers one ulp wider, so a rounding comparison never drops a candidate."""
        if family != "number":
            return self.point_keys(family, *bound)[0]
        as_float = float(bound[1])
        return as_float if math.isinf(as_float) else math.nextafter(as_float, -math.inf if down else math.inf)

    def create(self, table: int, prop: str, edm_type: str) -> str:
        key = key_sql(family_of(edm_type), prop)
        name = index_name(table, prop)
        return f'CREATE INDEX IF NOT EXISTS "{name}" ON entities ({key}, pk, rk) WHERE {self.partial(table)}'


SPELLED = SqliteIndexSql()


def _build(path: str, lock_path: str, table_id: int, prop: str, edm_type: str) -> None:
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
                    conn.execute("ROLLBACK")  # dropped, or declared again with another type
                    return
                conn.execute(SPELLED.create(table_id, prop, edm_type))
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
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        conn.close()


class SqliteIndexes(PlannedIndexes):
    """Index declarations, builds and lookups for :class:`~tabulae.storage.sqlite.tables.SqliteTables`."""

    def __init__(self, database: SqliteDatabase, layout: EntityLayout) -> None:
        super().__init__(layout, SPELLED)
        self._db = database
        self._lock_path = str(Path(database.path).with_name("tabulae.lock"))

    async def _read(self, make: Callable[[], Plan[T]]) -> T:
        try:
            return planned.read(self._db, make)
        except sqlite3.OperationalError as exc:  # dropped between the check and the lookup
            if "no such index" in str(exc) or "no query solution" in str(exc):
                raise IndexUnavailable(str(exc)) from exc
            raise

    async def _write(self, make: Callable[[], Plan[T]], transaction: bool = True) -> T:
        return await planned.write(self._db, make)

    async def _build(self, table: int, prop: str, edm_type: str) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _build, self._db.path, self._lock_path, table, prop, edm_type)
