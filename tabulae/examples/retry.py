"""Retry advice: transient 503 and 500 answers are normal; retry them with exponential back-off.

The problem: Azure moves partitions between servers to balance load, and while one moves (or
while a partition is over its target) requests get ``503 ServerBusy``, ``500 InternalError`` or
``500 OperationTimedOut``. Code that treats those as fatal fails in production a few times a
day; code that retries at once, in a loop, adds load exactly where there is too much.

The design: a retry policy with exponential back-off (here 0.2 s, doubling, up to eight
retries), which Microsoft's SDKs carry; a request refused this way did nothing, so sending it
again is safe, and waiting longer each time lets a moving partition come back.

The trade-off: a retried operation takes longer (seconds, when a partition moves), so
deadlines must allow for it; and a write answered 500 OperationTimedOut on Azure may have been
applied, so writes should be idempotent (an upsert, or an insert that treats 409 as done).

This example needs a server that injects faults: ``tabulae serve --faults 0.1``.
"""

from __future__ import annotations

from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.policies import RetryMode

from tabulae.examples.harness import Example, SkipExample

TITLE = "Retry advice: exponential back-off meets injected 503/500 answers"

_WRITES = 60


def run(ex: Example) -> None:
    bare = ex.table("noretry", retry_total=0)
    failed = 0
    with ex.operation(f"{_WRITES} upserts without a retry policy") as op:
        for i in range(_WRITES):
            try:
                bare.upsert_entity({"PartitionKey": f"p{i % 6}", "RowKey": f"{i:03d}", "N": i})
            except HttpResponseError as exc:
                if exc.status_code is None or exc.status_code < 500:
                    raise
                failed += 1
    if failed == 0:
        raise SkipExample(
            f"no transient failure in {_WRITES} requests: the server injects none "
            f"(start it with --faults 0.1 to see the retry policy at work)"
        )
    ex.claim(failed == op.failures, f"without retries {failed} of {_WRITES} writes failed with a 5xx")
    patient = ex.table(
        "backoff",
        retry_total=8,
        retry_status=8,
        retry_backoff_factor=0.2,
        retry_backoff_max=4,
        retry_mode=RetryMode.Exponential,
    )
    with ex.operation(f"{_WRITES} upserts with exponential back-off") as op:
        for i in range(_WRITES):
            patient.upsert_entity({"PartitionKey": f"p{i % 6}", "RowKey": f"{i:03d}", "N": i})
    ex.claim(
        op.requests == _WRITES + op.failures and op.failures > 0,
        f"all {_WRITES} writes succeeded: {op.failures} attempts were answered 5xx and retried",
    )
    with ex.operation("count what was written (retried as well)") as op:
        written = sorted(e["N"] for e in patient.list_entities())
    ex.claim(written == list(range(_WRITES)), f"each of the {_WRITES} entities is there exactly once")
