"""Prepend/append anti-pattern: PartitionKeys that only grow (or only shrink) put every insert at one end.

The problem: Azure keeps a table's partitions in key order and splits them into ranges served by
different servers. When each new entity's PartitionKey is larger than the last one (a
timestamp, a counter) every insert goes to the last range, and when it is smaller (reverse
ticks) to the first: one server takes all the inserts, and the table cannot be balanced however
many partitions it has. ``hot-partition`` shows where that ends, with ``--targets azure``.

The design: start the PartitionKey with something that spreads consecutive
inserts, here the department and employee the event is about, so consecutive inserts land at
unrelated places in the key order while each employee's events stay together.

The trade-off: reading "all events between 15:04 and 15:06" is no longer a range of
PartitionKeys; it is a query per department and employee (or a scan). Choose the spread by the
queries the application must answer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tabulae.examples.harness import Example
from tabulae.examples.log_tail import reverse_ticks
from tabulae.examples.staff import EMPLOYEES

TITLE = "Prepend/append anti-pattern: increasing or decreasing PartitionKeys, warned; spread keys fixed"

_EVENTS = 24  # more than the server's run of 16 that makes a warning


def run(ex: Example) -> None:
    start = datetime(2026, 11, 26, 15, 0, tzinfo=UTC)
    moments = [start + timedelta(seconds=5 * i) for i in range(_EVENTS)]
    appended = ex.table("appendonly")
    with ex.operation(f"{_EVENTS} inserts, PartitionKey = the time (increasing)"):
        for i, moment in enumerate(moments):
            appended.create_entity({"PartitionKey": moment.strftime("%Y%m%d%H%M%S"), "RowKey": "e", "N": i})
    ex.claim(
        len(ex.warnings(appended.table_name, "append-only")) == 1,
        "the server warns that the inserts are append-only",
    )
    prepended = ex.table("prependonly")
    with ex.operation(f"{_EVENTS} inserts, PartitionKey = reverse ticks (decreasing)"):
        for i, moment in enumerate(moments):
            prepended.create_entity({"PartitionKey": reverse_ticks(moment), "RowKey": "e", "N": i})
    ex.claim(
        len(ex.warnings(prepended.table_name, "prepend-only")) == 1,
        "the server warns that the inserts are prepend-only",
    )
    spread = ex.table("spreadkeys")
    with ex.operation(f"{_EVENTS} inserts, PartitionKey = department_employee"):
        for i, moment in enumerate(moments):
            who = EMPLOYEES[(i * 7) % len(EMPLOYEES)]
            spread.create_entity(
                {
                    "PartitionKey": f"{who.department}_{who.employee_id}",
                    "RowKey": moment.strftime("%Y%m%d%H%M%S"),
                    "N": i,
                }
            )
    ex.claim(
        ex.warnings(spread.table_name, "append-only") == []
        and ex.warnings(spread.table_name, "prepend-only") == [],
        "with the department and employee first, no warning: consecutive inserts land apart",
    )
