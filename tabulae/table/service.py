"""The Table service's operations and their rules, above storage and below HTTP.

This layer owns what makes a table service more than a key-value store: the existence and
ETag rules of each write, entity group transactions, ``$filter`` planning and evaluation, and
paging with continuation tokens. It receives validated model objects and returns stored
entities; it never sees HTTP and never writes SQL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tabulae.model.entity import SYSTEM_NAMES, StoredEntity, check_property_name
from tabulae.model.errors import MSG_BATCH_TOO_MANY, ServiceError
from tabulae.model.indexes import FAMILIES, READY, IndexInfo
from tabulae.model.mutation import Mutation
from tabulae.model.names import check_table_name
from tabulae.model.policies import (
    ServiceProperties,
    SignedIdentifier,
    decode_acl,
    decode_service_properties,
    encode_acl,
    encode_service_properties,
)
from tabulae.storage.indexes import IndexUnavailable
from tabulae.storage.scans import KeyRange, ScanChunk
from tabulae.storage.tables import TableStore
from tabulae.table.paging import decode_token, encode_token
from tabulae.table.query.conditions import to_condition
from tabulae.table.query.evaluate import (
    compile_predicate,
    compile_table_predicate,
    references_user_properties,
)
from tabulae.table.query.index_plan import RANGE_CAP, IndexChoice, choose_index
from tabulae.table.query.nodes import Node, property_names
from tabulae.table.query.parser import parse_filter
from tabulae.table.query.plan import QueryPlan, clip_to_range, plan_query

log = logging.getLogger("tabulae")

MAX_PAGE = 1000
INDEX_TYPES = tuple(FAMILIES)  # the Edm types a property index may be declared with
MAX_BATCH_OPERATIONS = 100
SCAN_CHUNK = 1000
SCAN_WINDOW = 20_000  # rows a filtered scan examines per store call, between yields to the loop
PAGE_TIME_BUDGET = 5.0  # seconds a page may scan before it ends early with a token

Predicate = Callable[[str, str, int, dict], bool]
Fetch = Callable[[tuple[str, str] | None, int], Awaitable[ScanChunk]]


@dataclass(slots=True)
class EntityPage:
    """One page of Query Entities, with the cost figures users see in ``x-tabulae-*`` headers."""

    entities: list[StoredEntity]
    next_partition_token: str | None
    next_row_token: str | None
    query_class: str
    scanned: int
    partition: str | None = None  # the one PartitionKey the query was confined to, if any


@dataclass(slots=True)
class TablePage:
    """One page of Query Tables; ``scanned`` counts the table names read for it (a listing reads
    the account's tables in name order and tests each against the filter: a table scan)."""

    names: list[str]
    next_token: str | None
    scanned: int = 0


def check_index_property(prop: str, edm_type: str) -> None:
    """An index is on a user property (a valid name, not a key or Timestamp) of an indexable type."""
    if prop in SYSTEM_NAMES:
        raise ServiceError(
            "InvalidInput", f"'{prop}' is a system property: only user properties are indexed."
        )
    check_property_name(prop)
    if edm_type not in FAMILIES:
        allowed = ", ".join(sorted(FAMILIES))
        raise ServiceError("InvalidInput", f"An index type must be one of {allowed}.")


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A ``$filter`` parsed and planned once, to be handed on rather than parsed again."""

    node: Node | None
    plan: QueryPlan


def parse_query(filter_text: str | None) -> ParsedQuery:
    """Parse and plan ``filter_text`` (None: every entity); raises the filter's error."""
    node = parse_filter(filter_text) if filter_text else None
    return ParsedQuery(node, plan_query(node))


def plan_partition(plan: QueryPlan) -> str | None:
    """The one PartitionKey a plan is confined to (point and row-range classes), else None."""
    if plan.query_class in ("point", "row-range") and plan.ranges and plan.ranges[0].lower is not None:
        return plan.ranges[0].lower.pk
    return None


def check_top(top: str | None) -> int | None:
    """``$top`` is 1..1000 (0 gives an empty page); anything else is ``InvalidInput``."""
    if top is None or top == "":
        return None
    if not (top.isascii() and top.isdigit()) or len(top) > 4 or int(top) > MAX_PAGE:
        raise ServiceError("InvalidInput")
    return int(top)


class TableService:
    """The Table service's operations, over any :class:`TableStore`."""

    def __init__(self, store: TableStore, *, page_time_budget: float = PAGE_TIME_BUDGET) -> None:
        self.store = store
        self.page_time_budget = page_time_budget
        self._builds: set[asyncio.Future[IndexInfo]] = set()  # index builds running in the background

    # ------------------------------------------------------------------------------- tables

    async def create_table(self, account: str, name: str) -> str:
        check_table_name(name)
        await self.store.create_table(account, name)
        return name

    async def delete_table(self, account: str, name: str) -> None:
        check_table_name(name)
        await self.store.delete_table(account, name)

    async def get_table(self, account: str, name: str) -> str:
        check_table_name(name)
        stored = await self.store.get_table(account, name)
        if stored is None:
            raise ServiceError("ResourceNotFound")
        return stored

    async def query_tables(
        self, account: str, filter_text: str | None, top: int | None, next_token: str | None
    ) -> TablePage:
        predicate = compile_table_predicate(parse_filter(filter_text)) if filter_text else None
        after = decode_token(next_token) if next_token else None
        limit = MAX_PAGE if top is None else top
        if limit == 0:
            return TablePage([], None)
        names: list[str] = []
        scanned = 0
        deadline = time.monotonic() + self.page_time_budget
        while True:
            chunk = await self.store.list_tables(account, after, SCAN_CHUNK)
            scanned += len(chunk)
            for position, name in enumerate(chunk):
                if predicate is None or predicate(name):
                    names.append(name)
                    if len(names) == limit:
                        rest = chunk[position + 1 :]
                        more = any(predicate is None or predicate(n) for n in rest)
                        if more or len(chunk) == SCAN_CHUNK:
                            return TablePage(names, encode_token(name.lower()), scanned)
                        return TablePage(names, None, scanned)
            if len(chunk) < SCAN_CHUNK:
                return TablePage(names, None, scanned)
            after = chunk[-1].lower()
            if time.monotonic() > deadline:
                return TablePage(names, encode_token(after), scanned)

    # ------------------------------------------------------------------ policies and properties

    async def get_acl(self, account: str, table: str) -> list[SignedIdentifier]:
        check_table_name(table)
        return decode_acl(await self.store.get_acl(account, table))

    async def set_acl(self, account: str, table: str, identifiers: list[SignedIdentifier]) -> None:
        check_table_name(table)
        await self.store.set_acl(account, table, encode_acl(identifiers))

    async def get_service_properties(self, account: str) -> ServiceProperties:
        return decode_service_properties(await self.store.get_service_properties(account))

    async def set_service_properties(self, account: str, properties: ServiceProperties) -> None:
        await self.store.set_service_properties(account, encode_service_properties(properties))

    # ------------------------------------------------------------------------------ entities

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity:
        check_table_name(table)
        entity = await self.store.get_entity(account, table, pk, rk)
        if entity is None:
            raise ServiceError("ResourceNotFound")
        return entity

    async def write(self, account: str, table: str, mutation: Mutation) -> StoredEntity | None:
        """Insert, Update, Merge, Upsert or Delete one entity (the kind and If-Match say which)."""
        check_table_name(table)
        try:
            results = await self.store.apply(account, table, [mutation])
        except ServiceError as exc:
            exc.index = None  # only batch failures carry the operation index
            raise
        return results[0]

    async def submit_batch(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        """An entity group transaction: at most 100 changes, one partition, no key twice; one apply."""
        if not mutations:
            raise ServiceError("InvalidInput", index=0)
        if len(mutations) > MAX_BATCH_OPERATIONS:
            raise ServiceError("InvalidInput", MSG_BATCH_TOO_MANY, index=MAX_BATCH_OPERATIONS - 1)
        check_table_name(table)
        partition = mutations[0].pk
        seen: set[str] = set()
        for index, mutation in enumerate(mutations):
            if mutation.pk != partition:
                raise ServiceError("CommandsInBatchActOnDifferentPartitions", index=index)
            if mutation.rk in seen:
                raise ServiceError("InvalidDuplicateRow", index=index)
            seen.add(mutation.rk)
        try:
            return await self.store.apply(account, table, mutations)
        except ServiceError as exc:
            if exc.index is None and exc.status < 500:
                exc.index = 0  # a table-level failure (TableNotFound) is reported at operation 0
            raise

    async def query_entities(
        self,
        account: str,
        table: str,
        query: str | ParsedQuery | None,
        top: int | None,
        next_partition: str | None,
        next_row: str | None,
        key_range: tuple[str | None, str | None, str | None, str | None] | None = None,
    ) -> EntityPage:
        """One page: at most ``top`` (≤ 1,000) matches, ending early after the time budget.

        ``query`` is the ``$filter`` text, or that text already parsed (:func:`parse_query`).
        ``key_range`` (a SAS's spk, srk, epk, erk) clips the query: rows outside it are never seen.
        """
        check_table_name(table)
        parsed = query if isinstance(query, ParsedQuery) else parse_query(query)
        node, plan = parsed.node, parsed.plan
        if key_range is not None and any(bound is not None for bound in key_range):
            plan = clip_to_range(plan, *key_range)
        after: tuple[str, str] | None = None
        if next_partition or next_row:
            if not (next_partition and next_row):
                raise ServiceError("InvalidInput")
            after = (decode_token(next_partition), decode_token(next_row))
        limit = MAX_PAGE if top is None else top
        if limit == 0 or not plan.ranges:
            await self.require_table(account, table)
            return EntityPage([], None, None, plan.query_class, 0, plan_partition(plan))
        if plan.query_class != "point" and plan.residual is not None:
            page = await self._index_page(account, table, node, plan, after, limit)
            if page is not None:
                return page
        return await self._scan_page(account, table, plan, after, limit)

    async def _index_page(
        self,
        account: str,
        table: str,
        node: Node | None,
        plan: QueryPlan,
        after: tuple[str, str] | None,
        limit: int,
    ) -> EntityPage | None:
        """The page read through a property index, or ``None`` when no index serves the filter
        (or a range has too many candidates): the key-range plan then runs as usual. Index
        entries are read in key order, the exact residual decides each, and paging is the
        same code as a scan's, so pages and tokens are those of the scan."""
        indexes = await self.store.ready_indexes(account, table)
        choice: IndexChoice | None = choose_index(node, indexes)
        if choice is None:
            return None
        ranges: tuple[KeyRange, ...] = plan.ranges
        probe = choice.probe
        counted = 0
        try:
            if choice.is_range:
                counted = await self.store.index_count(account, table, probe, ranges, RANGE_CAP)
                if counted >= RANGE_CAP:
                    return None

            async def lookup(resume: tuple[str, str] | None, size: int) -> ScanChunk:
                return await self.store.index_scan(account, table, probe, ranges, resume, size)

            page = await self._scan_page(account, table, plan, after, limit, lookup)
        except IndexUnavailable:
            return None
        page.query_class = "index-scan"
        page.scanned += counted
        return page

    # ------------------------------------------------------------------- property indexes

    async def add_index(self, account: str, table: str, prop: str, edm_type: str, *, wait: bool) -> IndexInfo:
        """Declare an index and build it while the table stays in use. With ``wait`` return
        once it is usable (or failed); otherwise at once, with the build running on."""
        check_table_name(table)
        check_index_property(prop, edm_type)
        info = await self.store.create_index(account, table, prop, edm_type)
        if info.state == READY:
            return info
        build = asyncio.ensure_future(self.store.build_index(account, table, prop))
        self._builds.add(build)
        build.add_done_callback(self._build_done)
        if wait:
            return await asyncio.shield(build)
        return info

    def _build_done(self, build: asyncio.Future[IndexInfo]) -> None:
        self._builds.discard(build)
        if not build.cancelled() and build.exception() is not None:
            log.warning("index build failed: %s", build.exception())

    async def list_indexes(self, account: str, table: str | None) -> list[IndexInfo]:
        if table is not None:
            check_table_name(table)
        return await self.store.list_indexes(account, table)

    async def drop_index(self, account: str, table: str, prop: str) -> None:
        check_table_name(table)
        await self.store.drop_index(account, table, prop)

    async def require_table(self, account: str, table: str) -> None:
        """Raise ``TableNotFound`` early, so it wins over body errors as on Azure."""
        check_table_name(table)
        if await self.store.get_table(account, table) is None:
            raise ServiceError("TableNotFound")

    async def _scan_page(
        self,
        account: str,
        table: str,
        plan: QueryPlan,
        after: tuple[str, str] | None,
        limit: int,
        fetch: Fetch | None = None,
    ) -> EntityPage:
        """Scan the plan's ranges from ``after`` (or read candidates with ``fetch``, an index
        lookup). The residual goes to storage as a condition that its SQL decides (exactly, or
        as a superset); the compiled residual then decides what storage could not. Every row
        storage examined counts as scanned."""
        residual = plan.residual
        if residual is None:  # every row is a match: one read of limit + 1 rows decides the page
            rows = await self.store.scan(account, table, plan.ranges, after, limit + 1)
            page = rows[:limit]
            last = (page[-1].pk, page[-1].rk) if len(rows) > limit else None
            return self._page(page, last, plan, len(rows))
        predicate = compile_predicate(residual)
        needs_properties = references_user_properties(residual)
        referenced = frozenset(property_names(residual))
        condition = to_condition(residual)
        matches: list[StoredEntity] = []
        scanned = 0
        deadline = time.monotonic() + self.page_time_budget
        while True:
            want = limit - len(matches) + 1  # one more than the page holds: is there a next page?
            if fetch is None:
                chunk = await self.store.scan_filtered(
                    account, table, plan.ranges, after, SCAN_WINDOW, want, condition
                )
            else:
                chunk = await fetch(after, max(want, 100))
            scanned += chunk.examined
            for entity in chunk.rows:
                if not chunk.exact:
                    properties = entity.properties(referenced) if needs_properties else {}
                    if not predicate(entity.pk, entity.rk, entity.ticks, properties):
                        continue
                if len(matches) == limit:  # a match beyond the page: it continues after the last
                    return self._page(matches, (matches[-1].pk, matches[-1].rk), plan, scanned)
                matches.append(entity)
            if chunk.exhausted or chunk.last_key is None:
                return self._page(matches, None, plan, scanned)
            # A full page whose chunk ended on rows the residual refused (or a window's edge)
            # reads on for one more match: a token only when one follows, so an index and a
            # scan, whose chunks end in different places, give the same pages and tokens.
            after = chunk.last_key
            if time.monotonic() > deadline:
                return self._page(matches, after, plan, scanned)
            await asyncio.sleep(0)  # a long scan must not starve other requests of this worker

    @staticmethod
    def _page(
        matches: list[StoredEntity], resume_after: tuple[str, str] | None, plan: QueryPlan, scanned: int
    ) -> EntityPage:
        if resume_after is None:
            return EntityPage(matches, None, None, plan.query_class, scanned, plan_partition(plan))
        return EntityPage(
            matches,
            encode_token(resume_after[0]),
            encode_token(resume_after[1]),
            plan.query_class,
            scanned,
            plan_partition(plan),
        )
