"""High-volume delete: put what will be deleted together in a table of its own, and drop the table.

The problem: deleting many entities one by one costs a request each (or one per 100, in entity
group transactions within one partition), plus the queries that find them; for last month's log
entries that is as many operations as writing them was, all counted against the targets.

The design: one table per period (``logs202610``, ``logs202611``, ...). Writing goes to the
current period's table; deleting a period is one Delete Table request, whatever it holds.

The trade-off: a query across periods must query each table, and the application has to
create the next table in time (on Azure a new table also takes a moment to reach full speed,
and a deleted table's name cannot be reused for a while).
"""

from __future__ import annotations

from azure.data.tables import TableClient

from tabulae.examples.harness import Example

TITLE = "High-volume delete: a table per period, dropped with one request"

_ENTITIES = 300
_PARTITIONS = 3


def _fill(table: TableClient) -> None:
    for p in range(_PARTITIONS):
        table.submit_transaction(
            [
                ("create", {"PartitionKey": f"device{p}", "RowKey": f"{i:05d}", "Value": i})
                for i in range(_ENTITIES // _PARTITIONS)
            ]
        )


def run(ex: Example) -> None:
    shared = ex.table("logsshared")
    with ex.operation(f"shared table: {_ENTITIES} entities in {_PARTITIONS} partitions (EGTs)"):
        _fill(shared)
    with ex.operation("delete them from the shared table: query, then EGTs of deletes") as op:
        doomed = list(shared.list_entities(select=["PartitionKey", "RowKey"]))
        by_partition: dict[str, list[dict[str, str]]] = {}
        for entity in doomed:
            by_partition.setdefault(entity["PartitionKey"], []).append(entity)
        for rows in by_partition.values():
            for i in range(0, len(rows), 100):
                shared.submit_transaction([("delete", e) for e in rows[i : i + 100]])
    ex.claim(
        op.requests >= 1 + _ENTITIES // 100 and op.scanned == _ENTITIES,
        f"entity by entity: {op.requests} requests, {op.scanned} entities scanned to find them "
        f"and {_ENTITIES} deleted",
    )
    period = ex.table("logs202611")
    with ex.operation(f"table per period: {_ENTITIES} entities in logs202611 (EGTs)"):
        _fill(period)
    name = period.table_name
    with ex.operation("delete the period: Delete Table") as op:
        ex.table_service.delete_table(name)
    ex.forget_table(name)
    ex.claim(op.requests == 1, f"dropping the period's table removed all {_ENTITIES} entities in one request")
