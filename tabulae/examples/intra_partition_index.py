"""Intra-partition secondary index: store each entity once per key it is looked up by, in one partition.

The problem: the table indexes PartitionKey and RowKey only. Employees keyed by department and
employee id are found with a point query by id, but finding one by e-mail address means reading
the whole department and testing each entity's ``Email``: every entity read counts against the
partition's target, and the cost grows with the department.

The design: write each employee twice in the department's partition, once with RowKey
``empid_000123`` and once with ``email_ada.jones@contoso.com``. Both copies are written in one
entity group transaction, so they can never disagree. A lookup by either key is a point query,
and the ``empid_`` / ``email_`` prefixes give two sort orders for range queries as well.

The trade-off: twice the storage and twice the entities written per change (still one request,
since the copies share a partition); it only helps within one partition, which must stay under
its target (see ``inter-partition-index`` when it would not).
"""

from __future__ import annotations

from tabulae.examples.harness import Example
from tabulae.examples.staff import EMPLOYEES

TITLE = "Intra-partition secondary index: one copy per lookup key, one EGT per change"


def run(ex: Example) -> None:
    table = ex.table("intraindex")
    for department in ("Sales", "Marketing"):
        staff = [e for e in EMPLOYEES if e.department == department]
        with ex.operation(f"hire {len(staff)} in {department}: both copies in one EGT") as op:
            actions = []
            for e in staff:
                person = {"PartitionKey": department, "FirstName": e.first, "LastName": e.last,
                          "EmployeeId": e.employee_id, "Email": e.email}  # fmt: skip
                actions.append(("create", {**person, "RowKey": f"empid_{e.employee_id}"}))
                actions.append(("create", {**person, "RowKey": f"email_{e.email}"}))
            table.submit_transaction(actions)
        ex.claim(op.requests == 1, f"{2 * len(staff)} entities of {department} written in one request")
    with ex.operation("find by e-mail: point query on the email_ copy") as op:
        found = table.get_entity("Sales", "email_edsger.jones@contoso.com")
    ex.claim(
        found["EmployeeId"] == "000157" and dict(op.classes) == {"point": 1} and op.scanned == 1,
        "the lookup by e-mail is a point query that scans 1 entity",
    )
    with ex.operation("find by employee id: point query on the empid_ copy") as op:
        found = table.get_entity("Sales", "empid_000157")
    ex.claim(dict(op.classes) == {"point": 1}, "the lookup by id is a point query too")
    with ex.operation("employees with ids 000150-000209: a RowKey range") as op:
        ranged = list(
            table.query_entities(
                "PartitionKey eq 'Sales' and RowKey ge 'empid_000150' and RowKey lt 'empid_000210'"
            )
        )
    ex.claim(
        [e["EmployeeId"] for e in ranged] == ["000152", "000157", "000201"]
        and dict(op.classes) == {"row-range": 1}
        and op.scanned == len(ranged),
        f"an id range is a row-range scanning only the {len(ranged)} it returns",
    )
    with ex.operation("without the index: filter Email over the partition") as op:
        slow = list(table.query_entities("PartitionKey eq 'Sales' and Email eq 'edsger.jones@contoso.com'"))
    ex.claim(
        len(slow) == 2 and op.scanned == 16,
        f"filtering on a property reads the whole partition: scanned {op.scanned} to return "
        f"{len(slow)} (both copies match)",
    )
    with ex.operation("change a surname: both copies in one EGT") as op:
        table.submit_transaction(
            [
                (
                    "update",
                    {"PartitionKey": "Sales", "RowKey": key, "LastName": "Dijkstra"},
                    {"mode": "merge"},
                )
                for key in ("empid_000157", "email_edsger.jones@contoso.com")
            ]
        )
    ex.claim(op.requests == 1, "an update keeps both copies consistent in one atomic request")
