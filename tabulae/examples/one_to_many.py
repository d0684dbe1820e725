"""One-to-many relationships and heterogeneous entity types in one partition, read with ``$select``.

The problem: a department and its employees are related, and an application often wants both
at once (the department's name and head count with the list of its people). In separate tables
that is two queries, and updating the head count with the employees is not atomic.

The design: keep the department entity and its employee entities in the same partition, and
give every entity an ``EntityType`` property (``Department`` or ``Employee``) that says how to
read it. One row-range query returns the department with its employees; an entity group
transaction can add an employee and update the count together. ``$select`` (server-side
projection) asks for only the properties the page shows, so less data crosses the network.

The trade-off: the partition holds every entity of the department, so it must stay within the
partition's target, and the client must dispatch on ``EntityType`` (a query returns whatever
types match). Prefixing RowKeys with the type keeps each type in its own key range.
"""

from __future__ import annotations

from tabulae.examples.harness import Example
from tabulae.examples.staff import EMPLOYEES

TITLE = "One-to-many and heterogeneous types: department and employees in one partition, $select"


def run(ex: Example) -> None:
    table = ex.table("onetomany")
    sales = [e for e in EMPLOYEES if e.department == "Sales"]
    with ex.operation(f"department + {len(sales)} employees, one EGT (EntityType on each)") as op:
        actions = [
            (
                "create",
                {"PartitionKey": "Sales", "RowKey": "Department", "EntityType": "Department",
                 "DepartmentName": "Sales", "EmployeeCount": len(sales)},
            )
        ] + [
            (
                "create",
                {"PartitionKey": "Sales", "RowKey": f"Employee_{e.employee_id}", "EntityType": "Employee",
                 "FirstName": e.first, "LastName": e.last, "Email": e.email},
            )
            for e in sales
        ]  # fmt: skip
        table.submit_transaction(actions)
    ex.claim(op.requests == 1, f"{len(actions)} entities of two types written atomically in one request")
    with ex.operation("the department with its employees: one query") as op:
        everything = list(table.query_entities("PartitionKey eq 'Sales'"))
    kinds = [e["EntityType"] for e in everything]
    ex.claim(
        kinds.count("Department") == 1 and kinds.count("Employee") == len(sales),
        "one query returned the department and all its employees, told apart by EntityType",
    )
    ex.claim(
        dict(op.classes) == {"row-range": 1} and op.scanned == op.returned == len(everything),
        f"it is a row-range that scans exactly the {len(everything)} entities it returns",
    )
    with ex.operation("employees only, names only: RowKey range + $select") as op:
        names = list(
            table.query_entities(
                "PartitionKey eq 'Sales' and RowKey ge 'Employee_' and RowKey lt 'Employee`'",
                select=["FirstName", "LastName"],
            )
        )
    ex.claim(
        len(names) == len(sales) and all(set(e) == {"FirstName", "LastName"} for e in names),
        "$select returned only FirstName and LastName for each employee",
    )
    ex.claim(
        op.scanned == len(sales),
        "the type prefix on the RowKey keeps the employees in one key range: nothing else is scanned",
    )
    with ex.operation("hire one more: insert + update the count, one EGT") as op:
        table.submit_transaction(
            [
                ("create", {"PartitionKey": "Sales", "RowKey": "Employee_000300", "EntityType": "Employee",
                            "FirstName": "Katherine", "LastName": "Johnson"}),
                ("update", {"PartitionKey": "Sales", "RowKey": "Department", "EmployeeCount": len(sales) + 1},
                 {"mode": "merge"}),
            ]
        )  # fmt: skip
    ex.claim(op.requests == 1, "the new employee and the new head count are one atomic request")
