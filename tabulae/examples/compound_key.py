"""Compound key: join the identifiers of related data into one RowKey, so that one point query finds it.

The problem: an employee's yearly review belongs to the employee and to the year. Kept as
entities keyed by a review id, finding "the 2025 review of employee 000123" is a filter on two
properties, which reads the partition.

The design: a compound RowKey, ``000123_review_2025``: the employee id, the kind of data and
the year. A point query reads one review; the RowKey prefix ``000123_review_`` is a range
holding that employee's reviews in year order.

The trade-off: the key's parts and their order must be chosen for the queries (the reviews of
2025 across employees are not a range here), and fixed-width parts are needed for ranges to
sort right.
"""

from __future__ import annotations

from tabulae.examples.harness import Example
from tabulae.examples.staff import EMPLOYEES

TITLE = "Compound key: employee_review_year as the RowKey, found by a point query"


def run(ex: Example) -> None:
    table = ex.table("compoundkey")
    sales = [e for e in EMPLOYEES if e.department == "Sales"][:5]
    with ex.operation(f"{len(sales)} employees x 4 yearly reviews (one EGT)"):
        table.submit_transaction(
            [
                ("create", {"PartitionKey": "Sales", "RowKey": f"{e.employee_id}_review_{year}",
                            "Year": year, "Rating": (year + int(e.employee_id)) % 5 + 1})
                for e in sales
                for year in range(2022, 2026)
            ]
        )  # fmt: skip
    with ex.operation("the 2025 review of 000123: point query") as op:
        review = table.get_entity("Sales", "000123_review_2025")
    ex.claim("Rating" in review and dict(op.classes) == {"point": 1}, "one review is one point query")
    with ex.operation("every review of 000123: RowKey prefix range") as op:
        reviews = list(
            table.query_entities(
                "PartitionKey eq 'Sales' and RowKey ge '000123_review_' and RowKey lt '000123_review`'"
            )
        )
    ex.claim(
        [r["RowKey"][-4:] for r in reviews] == ["2022", "2023", "2024", "2025"]
        and dict(op.classes) == {"row-range": 1}
        and op.scanned == 4,
        "an employee's reviews are a row-range scanning only those 4, in year order",
    )
    with ex.operation("reviews of 2025 for everyone: not a range, the partition is read") as op:
        latest = list(table.query_entities("PartitionKey eq 'Sales' and Year eq 2025"))
    ex.claim(
        op.scanned == len(sales) * 4 and len(latest) == len(sales),
        f"a question the key was not built for reads the whole partition: scanned {op.scanned} "
        f"to return {len(latest)}",
    )
