"""The service as the front-end sees it: scalability targets, injected faults and partition insight.

:class:`GuardedService` passes every operation of :class:`TableService` through the
:class:`~tabulae.admission.gate.Gate` every service shares: refused up front if a fault is
injected or the partition or account is over its target (so a refused request applies nothing),
run, and what it cost recorded in entities written, read and scanned — the unit Azure's targets
are written in. Without ``--targets`` and ``--faults`` only the recording remains.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from tabulae.admission.gate import Gate
from tabulae.admission.throttle import Throttle
from tabulae.insight.partitions import Insight
from tabulae.model.entity import StoredEntity
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import Mutation, MutationKind
from tabulae.storage.tables import TableStore
from tabulae.table.query.index_plan import indexable_property
from tabulae.table.service import EntityPage, ParsedQuery, TableService, parse_query, plan_partition

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


@dataclass(slots=True)
class TableTicket:
    """A Table request: entities of one partition (or of several, ``pk`` None) of one table."""

    insight: Insight
    account: str
    table: str
    pk: str | None
    op: str
    cost: int
    query_class: str | None = None
    query: bool = False

    def fault_scope(self) -> tuple[str, str | None, str | None]:
        return self.account, self.table, self.pk

    def take(self, throttle: Throttle) -> None:
        throttle.admit(self.account, self.table, self.pk, self.cost, query=self.query)

    def refused(self, status: int, *, throttled: bool) -> None:
        self.insight.record(
            self.account, self.table, self.pk, op=self.op, query_class=self.query_class,
            throttled=throttled, status=status,
        )  # fmt: skip


class GuardedService(TableService):
    """:class:`TableService` with admission control and accounting around each operation."""

    def __init__(
        self,
        store: TableStore,
        *,
        page_time_budget: float,
        insight: Insight,
        gate: Gate,
    ) -> None:
        super().__init__(store, page_time_budget=page_time_budget)
        self.insight = insight
        self.gate = gate

    async def write(self, account: str, table: str, mutation: Mutation) -> StoredEntity | None:
        op = _operation_name(mutation)
        ticket = TableTicket(self.insight, account, table, mutation.pk, op, 1)
        result = await self.gate.run(ticket, super().write(account, table, mutation))
        self.insight.record(account, table, mutation.pk, op=op, written=1, status=200)
        return result

    async def submit_batch(
        self, account: str, table: str, mutations: Sequence[Mutation]
    ) -> list[StoredEntity | None]:
        pk = mutations[0].pk if mutations else None
        ticket = TableTicket(self.insight, account, table, pk, "batch", len(mutations))
        result = await self.gate.run(ticket, super().submit_batch(account, table, mutations))
        self.insight.record(account, table, pk, op="batch", written=len(mutations), status=202)
        return result

    async def get_entity(self, account: str, table: str, pk: str, rk: str) -> StoredEntity:
        ticket = TableTicket(self.insight, account, table, pk, "get", 1, "point")
        entity = await self.gate.run(ticket, super().get_entity(account, table, pk, rk))
        self.insight.record(account, table, pk, op="get", read=1, query_class="point", status=200)
        return entity

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
        """The page, admitted by the one partition the query is confined to: the filter is
        parsed and planned once, here, and handed on."""
        if isinstance(query, str):
            with contextlib.suppress(ServiceError):  # the query itself reports it, after admission
                query = parse_query(query)
        pk = plan_partition(query.plan) if isinstance(query, ParsedQuery) else None
        ticket = TableTicket(self.insight, account, table, pk, "query", 0, query=True)
        page = await self.gate.run(
            ticket, super().query_entities(account, table, query, top, next_partition, next_row, key_range)
        )
        pk = page.partition
        if self.gate.throttle is not None:
            self.gate.throttle.charge(account, table, pk, page.scanned)  # known only after the scan
        hint = None
        if page.query_class == "table-scan" and isinstance(query, ParsedQuery):
            hint = indexable_property(query.node)  # for insight's index suggestion
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
        self.gate.check_faults(account, name)
        return await super().create_table(account, name)

    async def delete_table(self, account: str, name: str) -> None:
        self.gate.check_faults(account, name)
        await super().delete_table(account, name)
        self.insight.forget_table(account, name)
