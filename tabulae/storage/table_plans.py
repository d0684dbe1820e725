"""The Table store's operations, written once as plans (:mod:`.plan`) over an :class:`EntityLayout`.

Both engines cluster entities by (table, PartitionKey, RowKey) in UTF-16 order, but name the
clustered key their own way: SQLite as ``(table_id, pk, rk)``, PostgreSQL as ``(dist, rk)``,
where ``dist`` is the table id's 8 bytes followed by the PartitionKey (Citus's distribution
column). A layout says that, and nothing else: which rows are a table's, what a PartitionKey is
stored as, how a row becomes an entity. The plans hold the steps: which table, which ranges in
which order, how many rows are still wanted, what a missing table means.

A front-end may remember table ids (:class:`TableIds`): every plan that uses a remembered id
confirms it when it finds nothing, since a table deleted and created again has a new id.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from tabulae.model import edm
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import ServiceError
from tabulae.storage.plan import Plan, Sql
from tabulae.storage.pushdown import Dialect, Fragment, Translation, translate
from tabulae.storage.rules import ranges_to_scan
from tabulae.storage.scans import Condition, KeyBound, KeyRange, ScanChunk
from tabulae.storage.tables import TableStore

T = TypeVar("T")

ATTEMPTS = 8  # reads of a table whose remembered id keeps turning out stale
ID_CACHE_LIMIT = 10_000

_TABLE = "FROM tables WHERE account = :account AND name_key = :name_key"


class EntityLayout:
    """How one engine stores a table's entities. The defaults are SQLite's columns; an engine
    overrides what it spells otherwise."""

    partition = "pk"  # the clustered key's first column after the table
    point = "table_id = :tid AND pk = :part AND rk = :rk"  # one entity, by its parameters
    alive = ""  # a condition every entity read adds: its table still exists
    index_drop = 'DROP INDEX IF EXISTS "{name}"'  # how a property index goes
    indexes_in_transaction = True  # whether dropping indexes may join a Delete Table's transaction

    def new_table_id(self) -> int | None:
        """The id of a new table, or None when the database assigns it."""
        return None

    def table_where(self, table_id: int, params: dict[str, Any], alias: str = "") -> str:
        """The condition selecting the table's rows (as an index range on the clustered key)."""
        params["tid"] = table_id
        return f"{alias}table_id = :tid"

    def partition_value(self, table_id: int, pk: str) -> bytes:
        return edm.utf16_sort_key(pk)

    def route(self, table_id: int, key_range: KeyRange, params: dict[str, Any], alias: str = "") -> str:
        """An extra condition naming the one partition a range lies in, where that routes a
        statement (Citus); empty where it would only add work."""
        return ""

    def entities(self, rows: Iterable[Sequence[Any]]) -> list[StoredEntity]:
        """The entities of rows ``(partition, rk, ticks, props)``."""
        text = edm.from_utf16_sort_key
        return [StoredEntity(text(pk), text(rk), ticks, props) for pk, rk, ticks, props in rows]

    def key(self, row: Sequence[Any]) -> tuple[str, str]:
        """The (PartitionKey, RowKey) of a row ``(partition, rk, …)``."""
        return edm.from_utf16_sort_key(row[0]), edm.from_utf16_sort_key(row[1])


class TableIds:
    """Table name -> id, remembered as a hint (an engine whose id lookups are cheap remembers
    nothing: ``limit`` 0)."""

    def __init__(self, limit: int = ID_CACHE_LIMIT) -> None:
        self._limit = limit
        self._ids: dict[tuple[str, str], int] = {}

    def get(self, key: tuple[str, str]) -> int | None:
        return self._ids.get(key)

    def remember(self, key: tuple[str, str], table_id: int | None) -> None:
        if table_id is None:
            self._ids.pop(key, None)
        elif self._limit:
            if len(self._ids) >= self._limit:
                self._ids.clear()
            self._ids[key] = table_id


def _names(account: str, table: str) -> dict[str, Any]:
    return {"account": account, "name_key": table.lower()}


def lookup(ids: TableIds, account: str, table: str) -> Plan[int | None]:
    """The table's current id (remembered), or None."""
    row = yield Sql(f"SELECT id {_TABLE}", _names(account, table), "one")
    table_id = int(row[0]) if row else None
    ids.remember((account, table.lower()), table_id)
    return table_id


def table_id(ids: TableIds, account: str, table: str) -> Plan[int]:
    """The table's current id; raises ``TableNotFound``."""
    found = yield from lookup(ids, account, table)
    if found is None:
        raise ServiceError("TableNotFound")
    return found


def in_table(
    ids: TableIds, account: str, table: str, body: Callable[[int], Plan[T]], empty: Callable[[T], bool]
) -> Plan[T]:
    """``body`` run with the table's id; raises ``TableNotFound``. A remembered id is used
    without a lookup, and confirmed only when ``body`` found nothing (then run again if stale)."""
    key = (account, table.lower())
    for _ in range(ATTEMPTS):
        remembered = ids.get(key)
        current = remembered if remembered is not None else (yield from table_id(ids, account, table))
        result = yield from body(current)
        if remembered is None or not empty(result):
            return result
        if (yield from table_id(ids, account, table)) == current:
            return result
    raise ServiceError("ServerBusy", detail="the table was deleted and created again while read")


# ----------------------------------------------------------------------------------- tables


def create_table(layout: EntityLayout, account: str, name: str) -> Plan[None]:
    """A new table row; a name taken raises ``TableAlreadyExists``. An engine that draws ids
    draws again when one met an existing id (about never)."""
    params = {**_names(account, name), "name": name}
    for _ in range(3):
        params["id"] = layout.new_table_id()
        columns, values = ("", "") if params["id"] is None else (", id", ", :id")
        added = yield Sql(
            f"INSERT INTO tables (account, name_key, name{columns})"
            f" VALUES (:account, :name_key, :name{values}) ON CONFLICT DO NOTHING",
            params,
            "rowcount",
        )
        if added:
            return
        if (yield Sql(f"SELECT 1 {_TABLE}", params, "one")) is not None:
            raise ServiceError("TableAlreadyExists")
    raise ServiceError("InternalError", detail="could not draw a free table id")


def delete_table(layout: EntityLayout, account: str, name: str) -> Plan[int]:
    """Delete the table row and its entities (and its indexes, where DDL is transactional);
    returns the table's id. Raises ``ResourceNotFound``."""
    row = yield Sql(f"DELETE {_TABLE} RETURNING id", _names(account, name), "one")
    if row is None:
        raise ServiceError("ResourceNotFound")
    deleted = int(row[0])
    params: dict[str, Any] = {}
    yield Sql(f"DELETE FROM entities WHERE {layout.table_where(deleted, params)}", params)
    if layout.indexes_in_transaction:
        yield from drop_table_indexes(layout, deleted)
    return deleted


def drop_table_indexes(layout: EntityLayout, deleted: int) -> Plan[None]:
    """A deleted table's property indexes go with it."""
    rows = yield Sql(
        "DELETE FROM property_indexes WHERE table_id = :tid RETURNING property", {"tid": deleted}, "all"
    )
    for (prop,) in rows:
        yield Sql(layout.index_drop.format(name=index_name(deleted, prop)))


def index_name(table: int, prop: str) -> str:
    """The engine's name of the property index on ``prop`` of table ``table``."""
    return f"px_{table}_{hashlib.sha1(prop.encode('utf-8')).hexdigest()[:16]}"


def get_table(account: str, name: str) -> Plan[str | None]:
    row = yield Sql(f"SELECT name {_TABLE}", _names(account, name), "one")
    return str(row[0]) if row else None


def list_tables(account: str, after: str | None, limit: int) -> Plan[list[str]]:
    rows = yield Sql(
        "SELECT name FROM tables WHERE account = :account AND name_key > :after"
        " ORDER BY name_key LIMIT :limit",
        {"account": account, "after": after or "", "limit": limit},
        "all",
    )
    return [str(row[0]) for row in rows]


def get_acl(account: str, table: str) -> Plan[bytes | None]:
    row = yield Sql(f"SELECT acl {_TABLE}", _names(account, table), "one")
    if row is None:
        raise ServiceError("TableNotFound")
    return None if row[0] is None else bytes(row[0])


def set_acl(account: str, table: str, acl: bytes) -> Plan[None]:
    changed = yield Sql(
        "UPDATE tables SET acl = :acl WHERE account = :account AND name_key = :name_key",
        {**_names(account, table), "acl": acl},
        "rowcount",
    )
    if not changed:
        raise ServiceError("TableNotFound")


# ---------------------------------------------------------------------------------- entities


def get_entity(
    layout: EntityLayout, ids: TableIds, account: str, table: str, pk: str, rk: str
) -> Plan[StoredEntity | None]:
    def read(current: int) -> Plan[StoredEntity | None]:
        params = {"part": layout.partition_value(current, pk), "rk": edm.utf16_sort_key(rk), "tid": current}
        row = yield Sql(
            f"SELECT ticks, props FROM entities WHERE {layout.point}{layout.alive}",
            params,
            "one",
        )
        return None if row is None else StoredEntity(pk, rk, int(row[0]), bytes(row[1]))

    return (yield from in_table(ids, account, table, read, lambda found: found is None))


def scan(
    layout: EntityLayout,
    ids: TableIds,
    account: str,
    table: str,
    ranges: Sequence[KeyRange],
    after: tuple[str, str] | None,
    limit: int,
) -> Plan[list[StoredEntity]]:
    """Up to ``limit`` entities of the ranges after ``after``, in key order."""

    def read(current: int) -> Plan[list[StoredEntity]]:
        return scan_rows(layout, current, ranges, after, limit)

    return (yield from in_table(ids, account, table, read, lambda found: not found))


def scan_rows(
    layout: EntityLayout,
    table: int,
    ranges: Sequence[KeyRange],
    after: tuple[str, str] | None,
    limit: int,
    conditions: Sequence[tuple[str, dict[str, Any]]] = (),
    source: str = "entities",
    within: str | None = None,
) -> Plan[list[StoredEntity]]:
    """Up to ``limit`` entities of the ranges, in key order: each range is read in one statement
    per condition (each a stream in key order, merged here), or one without ``conditions``.
    ``within`` replaces the table's condition (an index's own predicate, as its SQL must spell
    it); ``source`` the ``FROM`` item."""
    found: list[StoredEntity] = []
    for key_range in ranges_to_scan(ranges, after):
        need = limit - len(found)
        if need <= 0:
            break
        batch: list[tuple[Any, ...]] = []
        columns = f"{layout.partition}, rk"
        for condition, condition_params in conditions or (("", {}),):
            params = dict(condition_params)
            where = within if within is not None else layout.table_where(table, params)
            if within is None:
                where += layout.route(table, key_range, params)
            if condition:
                where += f" AND {condition}"
            where += range_sql(layout, table, key_range, after, params)
            params.update(tid=table, need=need)
            batch.extend(
                (
                    yield Sql(
                        f"SELECT {columns}, ticks, props FROM {source} WHERE {where}{layout.alive}"
                        f" ORDER BY {columns} LIMIT :need",
                        params,
                        "all",
                    )
                )
            )
        if conditions and len(conditions) > 1:
            batch.sort(key=lambda row: (bytes(row[0]), bytes(row[1])))
        found.extend(layout.entities(batch[:need]))
    return found


@dataclass(frozen=True, slots=True)
class Matching:
    """A pushed-down condition as an engine runs it (:mod:`.pushdown`): the ``FROM`` item of
    the rows read (aliased ``e``), the condition with its parameters, whether the condition
    decides every row exactly, and a check of each row returned where some may be undecided."""

    source: str
    condition: str
    params: dict[str, Any]
    exact: bool
    row_exact: Callable[[bytes], bool] | None = None


def named(sql: str, params: Sequence[Any], marker: str) -> tuple[str, dict[str, Any]]:
    """A pushdown fragment's positional parameters (``marker``) as the plan's named ones."""
    parts = sql.split(marker)
    text = parts[0] + "".join(f":w{index}{part}" for index, part in enumerate(parts[1:]))
    return text, {f"w{index}": value for index, value in enumerate(params)}


def scan_matching(
    layout: EntityLayout,
    table: int,
    ranges: Sequence[KeyRange],
    after: tuple[str, str] | None,
    want: int,
    matching: Matching,
    window: int | None,
) -> Plan[ScanChunk]:
    """Up to ``want`` rows that pass ``matching``, each range in one statement, and how many rows
    of the ranges were examined to find them (an index-only count of the same key range).

    With a ``window`` the call examines at most that many rows: the window's last key is found
    first (a walk of the key order that reads no JSON) and bounds the filtered query, so one
    call stays short where the database's work is the caller's (SQLite runs on the event loop).
    """
    found: list[StoredEntity] = []
    exact = matching.exact
    examined = 0
    for key_range in ranges_to_scan(ranges, after):
        params = dict(matching.params)
        within = layout.table_where(table, params, "e.") + layout.route(table, key_range, params, "e.")
        within += range_sql(layout, table, key_range, after, params, "e.") + layout.alive
        params["tid"] = table
        keys = f"e.{layout.partition}, e.rk"
        edge = None
        if window is not None:
            params["offset"] = window - examined - 1
            edge = yield Sql(
                f"SELECT {keys} FROM entities e WHERE {within} ORDER BY {keys} LIMIT 1 OFFSET :offset",
                params,
                "one",
            )
            if edge is not None:
                within += f" AND ({keys}) <= (:edge_p, :edge_r)"
                params.update(edge_p=edge[0], edge_r=edge[1])
        if matching.condition:
            params["need"] = want - len(found)
            rows = yield Sql(
                f"SELECT {keys}, e.ticks, e.props FROM {matching.source}"
                f" WHERE {within} AND {matching.condition} ORDER BY {keys} LIMIT :need",
                params,
                "all",
            )
            matched = layout.entities(rows)
            if matching.row_exact is not None:
                exact = exact and all(matching.row_exact(entity.blob) for entity in matched)
            found.extend(matched)
        count = f"SELECT count(*) FROM entities e WHERE {within}"
        if len(found) >= want:  # stopped at a match: count the rows up to it
            last = found[-1]
            params.update(last_p=layout.partition_value(table, last.pk), last_r=edm.utf16_sort_key(last.rk))
            counted = yield Sql(f"{count} AND ({keys}) <= (:last_p, :last_r)", params, "one")
            return ScanChunk(found, examined + int(counted[0]), (last.pk, last.rk), False, exact)
        if window is not None and edge is not None:
            return ScanChunk(found, window, layout.key(edge), False, exact)
        examined += int((yield Sql(count, params, "one"))[0])
    return ScanChunk(found, examined, None, True, exact)


def _bound_sql(
    layout: EntityLayout, table: int, bound: KeyBound, end: str, params: dict[str, Any], alias: str
) -> str:
    """One end of a range (``end`` is ``lo`` or ``hi``). With ``rk`` None the bound is a
    partition edge: comparing the partition column alone includes or excludes the whole
    partition."""
    op = (">" if end == "lo" else "<") + ("=" if bound.inclusive else "")
    params[end + "_p"] = layout.partition_value(table, bound.pk)
    if bound.rk is None:
        return f" AND {alias}{layout.partition} {op} :{end}_p"
    params[end + "_r"] = edm.utf16_sort_key(bound.rk)
    return f" AND ({alias}{layout.partition}, {alias}rk) {op} (:{end}_p, :{end}_r)"


def range_sql(
    layout: EntityLayout,
    table: int,
    key_range: KeyRange,
    after: tuple[str, str] | None,
    params: dict[str, Any],
    alias: str = "",
) -> str:
    """``AND …`` conditions selecting the keys of ``key_range`` strictly after ``after``, their
    parameters added to ``params``. Every condition is a range on the clustered key."""
    sql = ""
    if key_range.lower is not None:
        sql += _bound_sql(layout, table, key_range.lower, "lo", params, alias)
    if key_range.upper is not None:
        sql += _bound_sql(layout, table, key_range.upper, "hi", params, alias)
    if after is not None:
        params["after_p"] = layout.partition_value(table, after[0])
        params["after_r"] = edm.utf16_sort_key(after[1])
        sql += f" AND ({alias}{layout.partition}, {alias}rk) > (:after_p, :after_r)"
    return sql


class PlannedTables(TableStore):
    """The parts of the Table contract that are the same plan on every engine, over the engine's
    runner: ``_read`` runs a plan on a connection that reads, ``_write`` as a write (with
    ``transaction=False`` when its one write statement needs no transaction of its own)."""

    def __init__(self, layout: EntityLayout, ids: TableIds, pushdown: Dialect) -> None:
        self._layout = layout
        self._ids = ids
        self._pushdown = pushdown

    @abstractmethod
    async def _read(self, make: Callable[[], Plan[T]]) -> T: ...

    @abstractmethod
    async def _write(self, make: Callable[[], Plan[T]], transaction: bool = True) -> T: ...

    async def _read_long(self, make: Callable[[], Plan[T]], resumed: bool) -> T:
        """Run a read that may examine many rows (``resumed``: a scan that continues)."""
        return await self._read(make)

    window = False  # whether a filtered scan examines at most ``examine`` rows per call

    @abstractmethod
    def _matching(self, where: Fragment | bool, translation: Translation) -> Matching:
        """The engine's form of a pushed-down condition (``where`` False: nothing passes)."""

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
        """The condition runs in the database (:mod:`.pushdown`): rows that fail never leave it."""
        translation = translate(self._pushdown, condition)
        if translation.where is True:
            found = await self.scan(account, table, ranges, after, min(examine, want))
            last = (found[-1].pk, found[-1].rk) if found else None
            return ScanChunk(found, len(found), last, len(found) < min(examine, want), translation.exact)
        matching = self._matching(translation.where, translation)
        window = examine if self.window else None

        def read(current: int) -> Plan[ScanChunk]:
            return self._scan_matching(current, ranges, after, want, matching, window)

        plan = partial(in_table, self._ids, account, table, read, lambda chunk: not chunk.examined)
        return await self._read_long(plan, after is not None)

    def _scan_matching(
        self,
        table: int,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        want: int,
        matching: Matching,
        window: int | None,
    ) -> Plan[ScanChunk]:
        """The plan of one filtered chunk (:func:`scan_matching`; an engine may read otherwise)."""
        return scan_matching(self._layout, table, ranges, after, want, matching, window)

    async def create_table(self, account: str, name: str) -> None:
        await self._write(partial(create_table, self._layout, account, name), transaction=False)

    async def delete_table(self, account: str, name: str) -> None:
        """Readers check the table in the same statement as its entities (where the row and the
        entities may commit on different nodes), and ids are never reused, so no read sees
        entities of a deleted table; indexes an engine cannot drop inside the transaction go
        after it (a crash in between leaves an index over rows that no longer exist)."""
        deleted = await self._write(partial(delete_table, self._layout, account, name))
        self._ids.remember((account, name.lower()), None)
        if not self._layout.indexes_in_transaction:
            await self._write(partial(drop_table_indexes, self._layout, deleted), transaction=False)

    async def get_table(self, account: str, name: str) -> str | None:
        return await self._read(partial(get_table, account, name))

    async def list_tables(self, account: str, after: str | None, limit: int) -> list[str]:
        return await self._read(partial(list_tables, account, after, limit))

    async def get_acl(self, account: str, table: str) -> bytes | None:
        return await self._read(partial(get_acl, account, table))

    async def set_acl(self, account: str, table: str, acl: bytes) -> None:
        await self._write(partial(set_acl, account, table, acl), transaction=False)

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity | None:
        return await self._read(partial(get_entity, self._layout, self._ids, account, table, pk, rk))

    async def scan(
        self,
        account: str,
        table: str,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[StoredEntity]:
        return await self._read(partial(scan, self._layout, self._ids, account, table, ranges, after, limit))
