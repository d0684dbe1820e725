"""Index entities: keep, per value of a non-key property, an entity listing who has that value.

The problem: "all employees named Jones" filters on a property that is not a key, so it reads
every entity of the partition (or of the table) to return a few, and its cost grows with the
data, not with the answer.

The design: maintain an index entity per value, in a partition of its own (PartitionKey
``lastname_Sales``, RowKey ``Jones``) whose ``EmployeeIds`` property lists the matching
employees' RowKeys. A lookup is one point read of the index entity and one point read per
employee (or a single row-range query when the ids are close together).

The trade-off: every hire, rename or departure must update the index too. Inside one partition
an entity group transaction keeps both in step; across partitions (as here, so that index reads
do not load the employees' partition) they are kept in step eventually, through a queue
(``eventually-consistent``). An index entity holding thousands of ids should be split.
"""

from __future__ import annotations

from tabulae.examples.harness import Example
from tabulae.examples.staff import EMPLOYEES

TITLE = "Index entities: a point read of an index entity instead of a filter on a property"


def run(ex: Example) -> None:
    table = ex.table("indexentities")
    sales = [e for e in EMPLOYEES if e.department == "Sales"]
    with ex.operation(f"hire {len(sales)} employees (one EGT)"):
        table.submit_transaction(
            [
                ("create", {"PartitionKey": "Sales", "RowKey": e.employee_id, "FirstName": e.first,
                            "LastName": e.last})
                for e in sales
            ]
        )  # fmt: skip
    by_last: dict[str, list[str]] = {}
    for e in sales:
        by_last.setdefault(e.last, []).append(e.employee_id)
    with ex.operation(f"write {len(by_last)} index entities (one EGT, partition lastname_Sales)"):
        table.submit_transaction(
            [
                ("create", {"PartitionKey": "lastname_Sales", "RowKey": last, "EmployeeIds": " ".join(ids)})
                for last, ids in by_last.items()
            ]
        )
    with ex.operation("Joneses via the index: a point read of the index entity") as op:
        ids = table.get_entity("lastname_Sales", "Jones")["EmployeeIds"].split()
    ex.claim(dict(op.classes) == {"point": 1} and op.scanned == 1, "the index lookup is a point query")
    with ex.operation(f"... then {len(ids)} point reads of the employees") as op:
        joneses = [table.get_entity("Sales", employee_id)["FirstName"] for employee_id in ids]
    ex.claim(
        sorted(joneses) == ["Ada", "Donald", "Edsger"] and dict(op.classes) == {"point": len(ids)},
        f"{len(ids)} point reads, each scanning one entity",
    )
    with ex.operation("Joneses without an index: filter LastName") as op:
        filtered = list(table.query_entities("PartitionKey eq 'Sales' and LastName eq 'Jones'"))
    ex.claim(
        len(filtered) == 3 and op.scanned == len(sales),
        f"the filter reads the whole partition: scanned {op.scanned} to return 3",
    )
