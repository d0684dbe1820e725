"""Hot partition: more load on one PartitionKey than its target, answered with 503 Server Busy.

The problem: a partition is served by one server, and Azure promises it about 2,000 entities a
second. A design that sends every insert of the moment to one partition (events keyed by the
current hour, say, which is where the prepend/append anti-pattern leads) is capped at that rate
however many clients write: above it the service answers ``503 ServerBusy``, and every retry
adds to the load.

The design: spread the same writes over several PartitionKeys (here the hour followed by a
bucket number, so a reader of the hour queries a known, small set of partitions); each
partition then stays well under its own target.

The trade-off: reading "everything of this hour" becomes one query per bucket (or a
partition-scan over the hour's range), and an entity group transaction covers only one bucket.

This example needs a server that enforces the targets: ``tabulae serve --targets azure``, with
``--partition-target 100`` to see it with a few hundred entities instead of thousands.
"""

from __future__ import annotations

import math
import time

from azure.core.exceptions import HttpResponseError

from tabulae.examples.harness import Example, SkipExample

TITLE = "Hot partition: over the partition target a design gets 503s; spread keys do not"


def _write(table: object, batches: list[list[dict[str, object]]]) -> int:
    """Send each batch once, as fast as possible; return how many were refused with 503."""
    refused = 0
    for batch in batches:
        try:
            table.submit_transaction([("upsert", entity) for entity in batch])  # type: ignore[attr-defined]
        except HttpResponseError as exc:
            if exc.status_code != 503:
                raise
            refused += 1
    return refused


def run(ex: Example) -> None:
    target = float(ex.targets().get("partition", 2000.0))
    volume = max(300, math.ceil(3 * target / 100) * 100)  # three seconds' worth, in batches of 100
    hot = ex.table("hotpartition", retry_total=0)  # no retries: every 503 is seen, none resent
    hour = "2026-11-26T17"
    batches = [
        [{"PartitionKey": hour, "RowKey": f"{b:04d}-{i:03d}", "Value": i} for i in range(100)]
        for b in range(volume // 100)
    ]
    started = time.monotonic()
    with ex.operation(f"{volume} inserts into one partition ({hour}), EGTs of 100") as op:
        refused = _write(hot, batches)
    rate = volume / max(time.monotonic() - started, 1e-3)
    if refused == 0:
        raise SkipExample(
            f"{volume} entities went into one partition at {rate:.0f}/s without a 503: the server "
            f"does not enforce the targets, or this client cannot go over {target:.0f}/s (start "
            f"the server with --targets azure --partition-target 100 to need only a few hundred "
            f"entities)"
        )
    ex.claim(
        op.throttled == refused,
        f"{refused} of {len(batches)} batches were refused with 503 ServerBusy "
        f"(partition target {target:.0f} entities/s)",
    )
    warnings = ex.warnings(hot.table_name, "hot-partition")
    ex.claim(
        any(w["partition"] == hour and w["throttled"] > 0 for w in warnings),
        f"the server warns that partition {hour} is hot and was throttled",
    )
    spread = ex.table("spreadpartitions", retry_total=0)
    buckets = max(2, math.ceil(2 * volume / target))  # each bucket gets at most half its target
    per_bucket: dict[str, list[dict[str, object]]] = {}
    for n in range(volume):
        pk = f"{hour}-{n % buckets:02d}"
        per_bucket.setdefault(pk, []).append({"PartitionKey": pk, "RowKey": f"{n:06d}", "Value": n})
    spread_batches = [rows[i : i + 100] for rows in per_bucket.values() for i in range(0, len(rows), 100)]
    with ex.operation(f"the same {volume} spread over {buckets} PartitionKeys") as fixed:
        refused_spread = _write(spread, spread_batches)
    ex.claim(
        refused_spread == 0 and fixed.throttled == 0,
        f"spread over {buckets} partitions, all {len(spread_batches)} batches were accepted",
    )
    ex.claim(
        ex.warnings(spread.table_name, "hot-partition") == [],
        "no partition of the spread design is warned about",
    )
