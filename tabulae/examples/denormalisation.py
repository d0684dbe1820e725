"""Denormalisation: copy the related data a query needs into the entity it reads.

The problem: an employee's page shows the employee and the department's manager. Stored the
relational way, that is two reads: the employee, then the department by the key the employee
holds. Each read is a round trip and a transaction billed.

The design: store the manager's name and e-mail in each employee entity as well. One point
query returns everything the page needs.

The trade-off: the copies must be updated when the manager changes (every employee of the
department, in entity group transactions of up to 100 if they share a partition), and take
space. It pays when the data is read far more often than it changes.
"""

from __future__ import annotations

from tabulae.examples.harness import Example
from tabulae.examples.staff import EMPLOYEES

TITLE = "Denormalisation: one point query instead of two"


def run(ex: Example) -> None:
    table = ex.table("denormalised")
    sales = [e for e in EMPLOYEES if e.department == "Sales"]
    manager = {"ManagerName": "Margaret Hamilton", "ManagerEmail": "margaret.hamilton@contoso.com"}
    with ex.operation("normalised: department + employees (one EGT)"):
        table.submit_transaction(
            [("create", {"PartitionKey": "Sales", "RowKey": "Department", **manager})]
            + [("create", {"PartitionKey": "Sales", "RowKey": e.employee_id, "FirstName": e.first,
                           "LastName": e.last}) for e in sales]
        )  # fmt: skip
    with ex.operation("normalised read: employee, then department") as two:
        employee = table.get_entity("Sales", "000157")
        department = table.get_entity("Sales", "Department")
    with ex.operation("denormalised: employees carrying the manager (one EGT)"):
        table.submit_transaction(
            [("upsert", {"PartitionKey": "Sales", "RowKey": e.employee_id, "FirstName": e.first,
                         "LastName": e.last, **manager}) for e in sales]
        )  # fmt: skip
    with ex.operation("denormalised read: the employee alone") as one:
        combined = table.get_entity("Sales", "000157")
    ex.claim(
        combined["ManagerName"] == department["ManagerName"]
        and combined["FirstName"] == employee["FirstName"],
        "the one entity holds what the two reads returned",
    )
    ex.claim(
        (one.requests, dict(one.classes)) == (1, {"point": 1})
        and (two.requests, dict(two.classes)) == (2, {"point": 2}),
        "denormalised: 1 point query; normalised: 2",
    )
    with ex.operation(f"the price: a new manager rewrites {len(sales)} employees (one merge EGT)") as op:
        table.submit_transaction(
            [("update", {"PartitionKey": "Sales", "RowKey": e.employee_id, "ManagerName": "Grace Smith"},
              {"mode": "merge"}) for e in sales]
        )  # fmt: skip
    ex.claim(op.requests == 1, f"{len(sales)} copies updated in one request, since they share a partition")
