"""The service as the front-end sees it: scalability targets, injected faults and partition insight.

:class:`GuardedService` wraps every operation of :class:`TableService` in the same three steps:
refuse it up front if a fault is injected or the partition or account is over its target (so a
refused request applies nothing), run it, and record what it cost in entities written, read and
scanned — the unit Azure's targets are written in. Without ``--targets`` and ``--faults`` only
the recording remains, which is a few dictionary updates per request.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulae.admission.faults import FaultInjector
from tabulae.admission.throttle import Throttle
from tabulae.insight.partitions import Insight
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import TableError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.tables import TableStore
from tabulae.table.query.index_plan import indexable_property
from tabulae.table.query.parser import parse_filter
from tabulae.table.query.plan import plan_query
from tabulae.table.service import EntityPage, TableService, plan_partition

_OPERATION_NAMES = {
    MutationKind.INSERT: "insert",
    MutationKind.REPLACE: "update",
    MutationKind.MERGE: "merge",
    MutationKind.DELETE: "delete",
}


def _operation_name(mutation: Mutation) -> str:
    if mutation.kind in (MutationKind.REPLACE, MutationKind.MERGE) and mutation.if_match is None:
        return "upsert"
    return _OPERATION_NAMES[mutation.kind]


def query_partition(filter_text: str | None) -> str | None:
    """The one PartitionKey a query is confined to, worked out before it runs (for admission)."""
    try:
        return plan_partition(plan_query(parse_filter(filter_text) if filter_text else None))
    except TableError:
        return None  # the query itself will report the error


class GuardedService(TableService):
    """:class:`TableService` with admission control and accounting around each operation."""

    def __init__(
        self,
        store: TableStore,
        *,
        page_time_budget: float,
        insight: Insight,
        throttle: Throttle | None = None,
        faults: FaultInjector | None = None,
    ) -> None:
        super().__init__(store, page_time_budget=page_time_budget)
        self.insight = insight
        self.throttle = throttle
        self.faults = faults

    def _admit(
        self, account: str, table: str, pk: str | None, cost: int, op: str, *, query: bool = False
    ) -> None:
        """Refuse before any work: an injected fault first, then the targets."""
        if self.faults is not None:
            try:
                self.faults.check(account, table, pk)
            except TableError as error:
                self.insight.record(account, table, pk, op=op, status=error.status)
                raise
        if self.throttle is not None:
            try:
                self.throttle.admit(account, table, pk, cost, query=query)
            except TableError as error:
                self.insight.record(account, table, pk, op=op, throttled=True, status=error.status)
                raise

    async def write(self, account: str, table: str, mutation: Mutation) -> StoredEntity | None:
        op = _operation_name(mutation)
        self._admit(account, table, mutation.pk, 1, op)
        try:
            result = await super().write(account, table, mutation)
        except TableError as error:
            self.insight.record(account, table, mutation.pk, op=op, status=error.status)
            raise
        self.insight.record(account, table, mutation.pk, op=op, written=1, status=200)
        return result

    async def submit_batch(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        pk = mutations[0].pk if mutations else None
        self._admit(account, table, pk, len(mutations), "batch")
        try:
            result = await super().submit_batch(account, table, mutations)
        except TableError as error:
            self.insight.record(account, table, pk, op="batch", status=error.status)
            raise
        self.insight.record(account, table, pk, op="batch", written=len(mutations), status=202)
        return result

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity:
        self._admit(account, table, pk, 1, "get")
        try:
            entity = await super().get_entity(account, table, pk, rk)
        except TableError as error:
            self.insight.record(account, table, pk, op="get", query_class="point", status=error.status)
            raise
        self.insight.record(account, table, pk, op="get", read=1, query_class="point", status=200)
        return entity

    async def query_entities(
        self,
        account: str,
        table: str,
        filter_text: str | None,
        top: int | None,
        next_partition: str | None,
        next_row: str | None,
        key_range: tuple[str | None, str | None, str | None, str | None] | None = None,
    ) -> EntityPage:
        # Parsing the filter twice is paid only when admission control needs the partition.
        pk = query_partition(filter_text) if self.throttle or self.faults else None
        self._admit(account, table, pk, 0, "query", query=True)
        try:
            page = await super().query_entities(
                account, table, filter_text, top, next_partition, next_row, key_range
            )
        except TableError as error:
            self.insight.record(account, table, pk, op="query", status=error.status)
            raise
        pk = page.partition
        if self.throttle is not None:
            self.throttle.charge(account, table, pk, page.scanned)  # known only after the scan
        # For insight's index suggestion; a table scan costs far more than parsing again.
        hint = None
        if page.query_class == "table-scan" and filter_text:
            hint = indexable_property(parse_filter(filter_text))
        self.insight.record(
            account,
            table,
            pk,
            op="query",
            scanned=page.scanned,
            returned=len(page.entities),
            query_class=page.query_class,
            index_hint=hint,
            status=200,
        )
        return page

    async def create_table(self, account: str, name: str) -> str:
        if self.faults is not None:
            self.faults.check(account, name, None)
        return await super().create_table(account, name)

    async def delete_table(self, account: str, name: str) -> None:
        if self.faults is not None:
            self.faults.check(account, name, None)
        await super().delete_table(account, name)
        self.insight.forget_table(account, name)
