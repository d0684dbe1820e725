"""Property indexes, written once: declaring, listing, dropping and reading them (:mod:`.plan`).

An engine says how its index is spelled (:class:`IndexSql`: the key expression over the stored
JSON, the index's partial predicate, the keys a probe looks up) and how it is built (SQLite under
the writers' file lock on a helper thread, PostgreSQL ``CONCURRENTLY``); :class:`PlannedIndexes`
does the rest the same way on both.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from tabulae.model.errors import ServiceError
from tabulae.model.indexes import BUILDING, FAILED, READY, IndexInfo, family_of
from tabulae.storage.indexes import IndexEngine, IndexProbe, IndexUnavailable
from tabulae.storage.plan import Plan, Sql
from tabulae.storage.scans import KeyRange, ScanChunk
from tabulae.storage.table_plans import EntityLayout, TableIds, index_name, scan_rows, table_id

T = TypeVar("T")

NO_IDS = TableIds(limit=0)  # index statements always look the table up
_IS_ONE = "table_id = :tid AND property = :prop"
_ONE = f"FROM property_indexes WHERE {_IS_ONE}"


class IndexSql:
    """How one engine spells its property indexes."""

    declared = ("", "")  # extra columns of a declaration, and their values
    progress = ("CASE WHEN i.state = 'ready' THEN i.total END, i.total", "")  # (done, total), a join

    @abstractmethod
    def key_sql(self, family: str, prop: str) -> str:
        """The key expression of ``prop`` for an index of ``family``; NULL outside the family."""

    @abstractmethod
    def partial(self, table: int) -> str:
        """The index's predicate, its table, spelled as queries must repeat it."""

    def source(self, name: str) -> str:
        """The ``FROM`` item of a lookup through index ``name``."""
        return "entities"

    not_null = True  # a range says ``key IS NOT NULL`` even when bounded (else only when open)

    @abstractmethod
    def point_keys(self, family: str, edm_type: str, value: Any) -> list[Any]:
        """The keys an entity equal to an ``eq`` literal may be indexed under."""

    @abstractmethod
    def bound_key(self, family: str, bound: tuple[str, Any], down: bool) -> Any:
        """The key of a range's bound (``down``: the lower one), which may widen the range."""

    def widened(self, family: str, condition: str, key: str, params: dict[str, Any]) -> str:
        """A range's condition with the keys it must take in besides."""
        return condition

    def conditions(self, family: str, probe: IndexProbe, key: str) -> list[tuple[str, dict[str, Any]]]:
        """One condition per point key (each a stream in key order), or one for the range."""
        if probe.points:
            keys = dict.fromkeys(
                k for kind, value in probe.points for k in self.point_keys(family, kind, value)
            )
            return [(f"{key} = :ix", {"ix": point}) for point in keys]
        parts, params = [], {}
        for name, bound, op in (("ix_lo", probe.lower, ">="), ("ix_hi", probe.upper, "<=")):
            if bound is not None:
                parts.append(f"{key} {op} :{name}")
                params[name] = self.bound_key(family, bound, down=name == "ix_lo")
        if self.not_null or not parts:
            parts.insert(0, f"{key} IS NOT NULL")
        return [(self.widened(family, " AND ".join(parts), key, params), params)]


def declare(account: str, table: str, prop: str, edm_type: str, spelled: IndexSql) -> Plan[None]:
    """Declare an index (building), or retry a failed one; another type raises ``IndexAlreadyExists``."""
    tid = yield from table_id(NO_IDS, account, table)
    params = {"tid": tid, "prop": prop, "type": edm_type, "name": index_name(tid, prop), "state": BUILDING}
    row = yield Sql(f"SELECT edm_type, state {_ONE}", params, "one")
    if row is None:
        columns, values = spelled.declared
        yield Sql(
            f"INSERT INTO property_indexes (table_id, property, edm_type, state{columns})"
            f" VALUES (:tid, :prop, :type, :state{values}) ON CONFLICT DO NOTHING",
            params,
        )
    elif row[0] != edm_type:
        raise ServiceError("IndexAlreadyExists")
    elif row[1] == FAILED:
        yield Sql(f"UPDATE property_indexes SET state = :state, error = NULL WHERE {_IS_ONE}", params)


def drop(account: str, table: str, prop: str, layout: EntityLayout) -> Plan[None]:
    tid = yield from table_id(NO_IDS, account, table)
    if not (yield Sql(f"DELETE {_ONE}", {"tid": tid, "prop": prop}, "rowcount")):
        raise ServiceError("IndexNotFound")
    yield Sql(layout.index_drop.format(name=index_name(tid, prop)))


def listing(account: str, table: str | None, spelled: IndexSql) -> Plan[list[IndexInfo]]:
    progress, join = spelled.progress
    sql = (
        f"SELECT t.name, i.property, i.edm_type, i.state, i.error, {progress}"
        f" FROM tables t JOIN property_indexes i ON i.table_id = t.id{join} WHERE t.account = :account"
    )
    params: dict[str, Any] = {"account": account}
    if table is not None:
        yield from table_id(NO_IDS, account, table)
        sql += " AND t.name_key = :name_key"
        params["name_key"] = table.lower()
    rows = yield Sql(sql + " ORDER BY t.name_key, i.property", params, "all")
    return [
        IndexInfo(name, prop, kind, state, done, total, error)
        for name, prop, kind, state, error, done, total in rows
    ]


def ready(account: str, table: str) -> Plan[dict[str, str]]:
    """The table's ready indexes: property -> Edm type."""
    rows = yield Sql(
        "SELECT i.property, i.edm_type FROM tables t JOIN property_indexes i ON i.table_id = t.id"
        " WHERE t.account = :account AND t.name_key = :name_key AND i.state = :ready",
        {"account": account, "name_key": table.lower(), "ready": READY},
        "all",
    )
    return {str(prop): str(edm_type) for prop, edm_type in rows}


def declared(account: str, table: str, prop: str) -> Plan[tuple[int, str, str]]:
    """(table id, Edm type, state) of a declared index; raises ``IndexNotFound``."""
    tid = yield from table_id(NO_IDS, account, table)
    row = yield Sql(f"SELECT edm_type, state {_ONE}", {"tid": tid, "prop": prop}, "one")
    if row is None:
        raise ServiceError("IndexNotFound")
    return tid, str(row[0]), str(row[1])


def usable(account: str, table: str, probe: IndexProbe) -> Plan[int]:
    """The table's id, once its index on the probe's property is ready for the probe's family;
    else ``IndexUnavailable`` (dropped, rebuilt with another type, not built yet)."""
    row = yield Sql(
        "SELECT t.id, i.edm_type, i.state FROM tables t LEFT JOIN property_indexes i"
        " ON i.table_id = t.id AND i.property = :prop WHERE t.account = :account AND t.name_key = :name_key",
        {"account": account, "name_key": table.lower(), "prop": probe.property},
        "one",
    )
    if row is None:
        raise ServiceError("TableNotFound")
    if row[2] != READY or family_of(row[1]) != family_of(probe.index_type):
        raise IndexUnavailable(probe.property)
    return int(row[0])


def scan(
    layout: EntityLayout,
    spelled: IndexSql,
    account: str,
    table: str,
    probe: IndexProbe,
    ranges: Sequence[KeyRange],
    after: tuple[str, str] | None,
    limit: int,
) -> Plan[ScanChunk]:
    """Candidates of the probe in key order: every range is read through the index."""
    tid = yield from usable(account, table, probe)
    family = family_of(probe.index_type)
    conditions = spelled.conditions(family, probe, spelled.key_sql(family, probe.property))
    source = spelled.source(index_name(tid, probe.property))
    rows = yield from scan_rows(layout, tid, ranges, after, limit, conditions, source, spelled.partial(tid))
    last = (rows[-1].pk, rows[-1].rk) if rows else None
    return ScanChunk(rows, len(rows), last, len(rows) < limit, False)


def count(spelled: IndexSql, account: str, table: str, probe: IndexProbe, cap: int) -> Plan[int]:
    """The probe's candidates in the whole table, counted up to ``cap``."""
    tid = yield from usable(account, table, probe)
    family = family_of(probe.index_type)
    source = spelled.source(index_name(tid, probe.property))
    total = 0
    for condition, params in spelled.conditions(family, probe, spelled.key_sql(family, probe.property)):
        row = yield Sql(
            f"SELECT count(*) FROM (SELECT 1 FROM {source} WHERE {spelled.partial(tid)} AND {condition}"
            " LIMIT :cap) AS candidates",
            {**params, "cap": cap - total},
            "one",
        )
        total += int(row[0])
        if total >= cap:
            break
    return total


class PlannedIndexes(IndexEngine):
    """The index contract over an engine's runner: ``_read`` runs a plan on a connection that
    reads, ``_write`` one that writes (``transaction=False`` for DDL an engine must run outside
    one), ``_build`` builds one declared index the engine's way."""

    def __init__(self, layout: EntityLayout, spelled: IndexSql) -> None:
        self._layout = layout
        self._spelled = spelled
        self._builds: dict[tuple[int, str], asyncio.Future[Any]] = {}

    @abstractmethod
    async def _read(self, make: Callable[[], Plan[T]]) -> T: ...

    @abstractmethod
    async def _write(self, make: Callable[[], Plan[T]], transaction: bool = True) -> T: ...

    @abstractmethod
    async def _build(self, table: int, prop: str, edm_type: str) -> None:
        """Create the engine's index and mark it ready (or failed)."""

    async def create(self, account: str, table: str, prop: str, edm_type: str) -> IndexInfo:
        family_of(edm_type)
        await self._write(partial(declare, account, table, prop, edm_type, self._spelled))
        return await self._info(account, table, prop)

    async def build(self, account: str, table: str, prop: str) -> IndexInfo:
        """Build the index once, however many ask at the same time."""
        tid, edm_type, state = await self._read(partial(declared, account, table, prop))
        if state != READY:
            key = (tid, prop)
            future = self._builds.get(key)
            if future is None:
                future = self._builds[key] = asyncio.ensure_future(self._build(tid, prop, edm_type))
                future.add_done_callback(lambda _f: self._builds.pop(key, None))
            await asyncio.shield(future)
        return await self._info(account, table, prop)

    async def _info(self, account: str, table: str, prop: str) -> IndexInfo:
        for info in await self.listing(account, table):
            if info.property == prop:
                return info
        raise ServiceError("IndexNotFound")

    async def listing(self, account: str, table: str | None) -> list[IndexInfo]:
        return await self._read(partial(listing, account, table, self._spelled))

    async def drop(self, account: str, table: str, prop: str) -> None:
        await self._write(partial(drop, account, table, prop, self._layout), transaction=False)

    async def ready(self, account: str, table: str) -> dict[str, str]:
        return await self._read(partial(ready, account, table))

    async def scan(
        self,
        account: str,
        table: str,
        probe: IndexProbe,
        ranges: Sequence[KeyRange],
        after: tuple[str, str] | None,
        limit: int,
    ) -> ScanChunk:
        return await self._read(
            partial(scan, self._layout, self._spelled, account, table, probe, ranges, after, limit)
        )

    async def count(
        self, account: str, table: str, probe: IndexProbe, ranges: Sequence[KeyRange], cap: int
    ) -> int:
        return await self._read(partial(count, self._spelled, account, table, probe, cap))
