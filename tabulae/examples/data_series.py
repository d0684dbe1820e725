"""Data series: keep a whole series in one entity, one property per point.

The problem: a chart of messages sent per hour of the day needs 24 numbers. Kept as one entity
per hour, drawing it is a query over 24 entities and updating the day is up to 24 writes.

The design: one entity per employee and day with properties ``H00`` ... ``H23``. Reading the
series is one point query; adding to the current hour is one merge of one property.

The trade-off: an entity holds at most 252 properties of your own and 1 MiB, which bounds the
series (see ``wide-entities`` beyond that); two writers updating the same entity must use ETags
(``optimistic-concurrency``) or merges of distinct properties.
"""

from __future__ import annotations

from tabulae.examples.harness import Example

TITLE = "Data series: 24 hourly values in one entity, one point read"


def run(ex: Example) -> None:
    table = ex.table("dataseries")
    counts = [(h * 7) % 13 for h in range(24)]
    with ex.operation("one entity per hour: 24 entities (one EGT)"):
        table.submit_transaction(
            [("create", {"PartitionKey": "000123_20261126", "RowKey": f"H{h:02d}", "Sent": counts[h]})
             for h in range(24)]
        )  # fmt: skip
    with ex.operation("read the day: a query over 24 entities") as many:
        hourly = [e["Sent"] for e in table.query_entities("PartitionKey eq '000123_20261126'")]
    with ex.operation("one entity per day: 24 properties (one insert)"):
        table.create_entity(
            {
                "PartitionKey": "series",
                "RowKey": "000123_20261126",
                **{f"H{h:02d}": counts[h] for h in range(24)},
            }
        )
    with ex.operation("read the day: one point query") as one:
        day = table.get_entity("series", "000123_20261126")
    series = [day[f"H{h:02d}"] for h in range(24)]
    ex.claim(series == hourly == counts, "both designs return the same 24 values")
    ex.claim(
        dict(one.classes) == {"point": 1} and one.scanned == 1 and many.scanned == 24,
        f"the series entity is read by a point query scanning 1 entity; the per-hour design "
        f"scanned {many.scanned}",
    )
    with ex.operation("count a message in hour 17: merge one property") as op:
        table.update_entity({"PartitionKey": "series", "RowKey": "000123_20261126", "H17": counts[17] + 1})
    ex.claim(
        op.requests == 1 and table.get_entity("series", "000123_20261126")["H00"] == counts[0],
        "a merge updates one hour and leaves the other 23",
    )
