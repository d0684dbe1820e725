"""Summing the counters of several worker processes, and token buckets they share (issue 29).

Each worker records into its own counters; the worker that answers ``/metrics`` sums their
:meth:`state` (sent through :mod:`marshal`) into a fresh view. The sum must be exactly what one
process that saw every request would report. The throttle's buckets live in a ledger every
worker maps, so the targets are the server's.
"""

from __future__ import annotations

import asyncio
import marshal
import re
from pathlib import Path
from typing import Any

import pytest

from tabulae.admission.ledger import Ledger
from tabulae.admission.throttle import Targets, Throttle
from tabulae.insight.containers import ContainerCounters
from tabulae.insight.partitions import Insight
from tabulae.insight.queues import QueueInsight
from tabulae.insight.server import ServerInsight
from tabulae.model.errors import ServiceError


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _table_requests(insight: Insight, clock: FakeClock, part: int) -> None:
    """A workload, split over processes by ``part`` (each request goes to one of them)."""
    requests: list[tuple[str, str, str | None, dict[str, Any]]] = [
        ("acct", "Orders", "customer-1", {"op": "insert", "written": 1}),
        ("acct", "Orders", "customer-2", {"op": "batch", "written": 100}),
        (
            "acct",
            "Orders",
            None,
            {"op": "query", "scanned": 5000, "returned": 4, "query_class": "table-scan"},
        ),
        ("acct", "orders", "customer-1", {"op": "get", "read": 1, "query_class": "point"}),
        ("acct", "Logs", "\ud800lone", {"op": "upsert", "written": 3}),
        ("acct", "Orders", "customer-3", {"op": "insert", "written": 1, "throttled": True, "status": 503}),
        ("other", "Orders", "customer-1", {"op": "insert", "written": 1}),
    ]
    for index, (account, table, pk, figures) in enumerate(requests * 3):
        if index % 2 == part or part < 0:
            insight.record(account, table, pk, **{"status": 200, **figures})
        clock.now += 0.25


def test_summed_states_report_what_one_process_would() -> None:
    whole_clock, clocks = FakeClock(), [FakeClock(), FakeClock()]
    whole = Insight(whole_clock, partition_target=100)
    workers = [Insight(clock, partition_target=100) for clock in clocks]
    _table_requests(whole, whole_clock, -1)
    for part, (worker, clock) in enumerate(zip(workers, clocks, strict=True)):
        _table_requests(worker, clock, part)
    view = workers[0].view()
    for worker in workers:
        view.absorb(marshal.loads(marshal.dumps(worker.state())))
    summed, expected = view.snapshot(), whole.snapshot()
    assert summed["accounts"] == expected["accounts"]
    assert summed["tables"] == expected["tables"]
    assert sorted(map(repr, summed["partitions"])) == sorted(map(repr, expected["partitions"]))
    assert {w["kind"] for w in summed["warnings"]} == {w["kind"] for w in expected["warnings"]}
    assert view.prometheus() == whole.prometheus()


def test_queue_and_container_counts_sum() -> None:
    clock = FakeClock()
    whole, parts = QueueInsight(clock), [QueueInsight(clock), QueueInsight(clock)]
    boxes, box_parts = ContainerCounters(clock), [ContainerCounters(clock), ContainerCounters(clock)]
    for index in range(10):
        for target in (whole, parts[index % 2]):
            target.record("acct", "jobs", op="put", messages=1, status=201)
            target.record("acct", "jobs", op="get", messages=2, dequeue_counts=(7, 1), status=200)
        for counters in (boxes, box_parts[index % 2]):
            counters.record("acct", "photos", status=201, bytes_in=10)
    queue_view, box_view = parts[0].view(), ContainerCounters()
    for part, box_part in zip(parts, box_parts, strict=True):
        queue_view.absorb(marshal.loads(marshal.dumps(part.state())))
        box_view.absorb(marshal.loads(marshal.dumps(box_part.state())))
    assert queue_view.snapshot([], 0) == whole.snapshot([], 0)
    assert box_view.snapshot() == boxes.snapshot()


def test_hashed_view_hides_keys_and_names_and_keeps_the_sums() -> None:
    clock = FakeClock()
    tables, queues, boxes = Insight(clock), QueueInsight(clock), ContainerCounters(clock)
    tables.record("acct", "CustomerOrders", "customer-42", op="insert", written=1, status=201)
    tables.record("acct", "customerorders", "customer-42", op="insert", written=1, status=201)
    queues.record("acct", "invoices-for-bob", op="put", messages=1, status=201)
    boxes.record("acct", "bob-private", status=201)
    server = ServerInsight(tables, queues, boxes, secret=b"k" * 32)
    view = asyncio.run(server.view(hashed=True))
    text = view.tables.prometheus() + view.queues.prometheus([], 0) + view.containers.prometheus()
    for secret in ("customer-42", "ustomerorders", "CustomerOrders", "invoices-for-bob", "bob-private"):
        assert secret not in text and secret not in repr(view.tables.snapshot())
    (partition,) = view.tables.snapshot()["partitions"]
    assert re.fullmatch(r"#[0-9a-f]{12}", partition["partition"]) and partition["written"] == 2
    assert partition["partition"] == server.hash_name("customer-42")  # stable
    assert (
        ServerInsight(tables, queues, boxes, secret=b"j" * 32).hash_name("customer-42")
        != partition["partition"]
    )
    plain = asyncio.run(server.view())
    assert plain.tables.snapshot()["partitions"][0]["partition"] == "customer-42"


def test_workers_share_the_buckets_through_the_ledger(tmp_path: Path) -> None:
    clock = FakeClock()
    targets = Targets(partition_rate=20, account_rate=1000)
    ledgers = [Ledger(tmp_path, 2) for _ in range(2)]
    first, second = (Throttle(targets, clock=clock, workers=2, ledger=ledger) for ledger in ledgers)
    first.admit("acct", "t", "p", 100)  # a full bucket (20) admits a batch of 100: 80 owed
    with pytest.raises(ServiceError) as refused:
        second.admit("acct", "t", "p", 1)  # the other worker sees the debt
    assert refused.value.code == "ServerBusy"
    second.admit("acct", "t", "other", 20)  # other partitions are not affected
    clock.now += 4.0
    assert second.available("acct", "t", "p") == pytest.approx(0.0)
    clock.now += 1.0
    second.admit("acct", "t", "p", 20)  # five seconds repaid it, whichever worker asks
    with pytest.raises(ServiceError):
        first.admit("acct", "t", "p", 1)
    assert second.targets.partition_rate == 20  # the server's target, not a worker's share
    for ledger in ledgers:
        ledger.close()


def test_a_worker_beyond_the_ledgers_files_counts_alone(tmp_path: Path) -> None:
    ledgers = [Ledger(tmp_path, 2) for _ in range(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger-0.bin", "ledger-1.bin"]
    ledgers[2].own[5] = 9.0
    assert ledgers[0].busy_until(5) == 0.0 and ledgers[1].busy_until(5) == 0.0
    ledgers[0].own[5] = 3.0
    assert ledgers[1].busy_until(5) == 3.0
    ledgers[0].close()
    replacement = Ledger(tmp_path, 2)  # claims the file the closed one held, and its state
    assert replacement.own[5] == 3.0
    for ledger in (replacement, *ledgers):
        ledger.close()
