"""Log tail: read the newest entities of a partition first, by giving them the smallest RowKeys.

The problem: a partition keeps its entities in RowKey order, ascending, and a query reads them in
that order only. Entities keyed by the time they were written (``2026-11-26T17:30:00…``) come
back oldest first, so "the last five events" means reading the whole partition to keep its end.

The design: key each entity by *reverse ticks*, the largest possible tick count minus the
event's ticks, zero-padded to a fixed width so that string order is numeric order. The newest
event then has the smallest RowKey, and "the last five" is the first page of a query with
``$top=5``: a row range that stops after five entities.

The trade-off: the RowKey no longer reads as a date (convert it back to show it), and every
writer must use the same width and clock; new entities still go to the partition's one end,
which is fine within a partition but not across partitions (see ``prepend-append``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tabulae.examples.harness import Example

TITLE = "Log tail: reverse-tick RowKeys put the newest entities first"

_MAX_TICKS = 3155378975999999999  # DateTime.MaxValue in 100 ns ticks since 0001-01-01
_EPOCH_TICKS = 621355968000000000  # ticks at 1970-01-01


def reverse_ticks(moment: datetime) -> str:
    """The RowKey of an event at ``moment``: later events sort first, 19 digits wide."""
    ticks = _EPOCH_TICKS + int(moment.timestamp() * 10_000_000)
    return f"{_MAX_TICKS - ticks:019d}"


def run(ex: Example) -> None:
    events = ex.table("logtail")
    start = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    count = 60
    with ex.operation(f"write {count} events of one device (EGTs of 100 max)"):
        events.submit_transaction(
            [
                (
                    "upsert",
                    {
                        "PartitionKey": "device-7",
                        "RowKey": reverse_ticks(start + timedelta(seconds=10 * i)),
                        "Reading": i,
                        "At": (start + timedelta(seconds=10 * i)).isoformat(),
                    },
                )
                for i in range(count)
            ]
        )
    with ex.operation("read the 5 newest events ($top=5, first page)") as op:
        pages = events.query_entities("PartitionKey eq 'device-7'", results_per_page=5).by_page()
        newest = list(next(pages))
    readings = [e["Reading"] for e in newest]
    ex.claim(
        readings == [59, 58, 57, 56, 55], f"the first page holds the 5 newest events, newest first {readings}"
    )
    ex.claim(
        dict(op.classes) == {"row-range": 1} and op.returned == 5 and op.scanned == 6,
        f"the query is one row-range that scans only the 5 entities it returns and the next one, "
        f"whose keys become the continuation token (classes {dict(op.classes)}, scanned "
        f"{op.scanned}, returned {op.returned})",
    )
    with ex.operation(f"the same {count} events keyed by forward time, in another partition"):
        events.submit_transaction(
            [
                ("upsert", {"PartitionKey": "device-8", "RowKey": f"{i:019d}", "Reading": i})
                for i in range(count)
            ]
        )
    with ex.operation("read the 5 newest of those: the whole partition, keep the end") as full:
        oldest_first = list(events.query_entities("PartitionKey eq 'device-8'"))
    last = [e["Reading"] for e in oldest_first[-5:]][::-1]
    ex.claim(
        last == [59, 58, 57, 56, 55] and full.scanned == count,
        f"with time-ordered RowKeys the newest 5 cost a scan of all {count} entities of the partition "
        f"(scanned {full.scanned})",
    )
