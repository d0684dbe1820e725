"""Crash safety (issue #7): SIGKILL at random moments under mixed load loses no acknowledged write
and never leaves half a batch.

Several clients write at once, each to keys of its own (two partitions of eight rows), one
request at a time: inserts, replaces and merges with If-Match (``PUT``, ``PATCH`` and the
``MERGE`` verb), both upserts, deletes with If-Match, and ``$batch`` changesets of 2-4 of these on
one partition. Every write carries a fresh sequence number, so each version of a key is
distinguishable. Each client keeps a ledger: the last acknowledged version of every key (its
properties and ETag) and the one write that may be in flight.

A cycle runs the load, SIGKILLs the whole server (supervisor and workers at once) after a random
delay, checks the files left behind with ``PRAGMA integrity_check`` (on a copy, so recovery is
still the server's job), restarts the server on the same data directory (alternating
``--workers 1`` and ``--workers 2``) and reads every entity back. Then, for every key:

* without a write in flight, the key must hold exactly its last acknowledged version (same
  properties, same ETag; absent after an acknowledged delete);
* with a write in flight, it holds either that version or the in-flight write's result;
* the keys of an in-flight batch were all written or none was;
* no key that no client wrote exists.

After the last cycle the server is stopped and the store must pass ``PRAGMA integrity_check``.
CI runs 5 cycles; ``scripts/crash-soak --cycles N`` runs the same code for as long as you like.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.rawhttp import RawClient, py_keys
from tests.system.test_reliability_support import (
    CONNECTION_ERRORS,
    BatchOp,
    IsolatedServer,
    crash_image_integrity,
    entity_map,
    integrity_check,
    parse_batch_response,
    query_all,
    send_batch,
)

TABLE = "crashsafety"
PARTITIONS_PER_CLIENT = 2
ROWS_PER_PARTITION = 8
PADDING = (0, 16, 400, 4000)  # property sizes: small rows, and some that spill onto more pages

Key = tuple[str, str]


@dataclass
class Version:
    """A key's acknowledged state: its user properties and ETag, or absent (``props is None``)."""

    props: dict[str, Any] | None = None
    etag: str | None = None


@dataclass
class InFlight:
    """A write sent but not acknowledged: the state each of its keys has if it was applied."""

    outcomes: dict[Key, dict[str, Any] | None]
    is_batch: bool


@dataclass
class Planned:
    """One operation: how it is sent alone or inside a changeset, and what it leaves behind."""

    key: Key
    kind: str
    method: str
    target: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    outcome: dict[str, Any] | None


@dataclass
class CycleStats:
    acked_writes: int = 0
    acked_batches: int = 0
    batched_writes: int = 0
    in_flight_writes: int = 0
    in_flight_applied: int = 0
    keys_compared: int = 0


@dataclass
class CrashReport:
    """What a run of crash cycles did and found; ``violations`` is empty when all is well."""

    cycles: int = 0
    acked_writes: int = 0
    acked_batches: int = 0
    batched_writes: int = 0
    in_flight_writes: int = 0
    in_flight_applied: int = 0
    keys_compared: int = 0
    violations: list[str] = field(default_factory=list)

    def add(self, stats: CycleStats) -> None:
        self.acked_writes += stats.acked_writes
        self.acked_batches += stats.acked_batches
        self.batched_writes += stats.batched_writes
        self.in_flight_writes += stats.in_flight_writes
        self.in_flight_applied += stats.in_flight_applied
        self.keys_compared += stats.keys_compared

    def summary(self) -> str:
        return (
            f"cycles run: {self.cycles}; writes checked: {self.acked_writes} acknowledged "
            f"({self.batched_writes} in {self.acked_batches} batches); in flight at a kill: "
            f"{self.in_flight_writes} ({self.in_flight_applied} applied); key states compared: "
            f"{self.keys_compared}; violations: {len(self.violations)}"
        )


class LoadClient:
    """One client of the workload: owns its keys and writes them sequentially."""

    def __init__(self, index: int, seed: int) -> None:
        self.index = index
        self.rng = random.Random(seed)
        self.keys: list[Key] = [
            (f"c{index}p{p}", f"r{r:02d}")
            for p in range(PARTITIONS_PER_CLIENT)
            for r in range(ROWS_PER_PARTITION)
        ]
        self.acked: dict[Key, Version] = {key: Version() for key in self.keys}
        self.in_flight: InFlight | None = None
        self.sequence = 0
        self.batch_ids = 0
        self.stats = CycleStats()
        self.anomalies: list[str] = []

    # ---------------------------------------------------------------------------- writing

    def run(self, port: int, stop: threading.Event) -> None:
        client = RawClient(port)
        while not stop.is_set() and self.in_flight is None:
            try:
                if self.rng.random() < 0.35:
                    self._batch(client)
                else:
                    self._single(client)
            except Exception as exc:  # a bug in the checker itself must not pass silently
                self.anomalies.append(f"client {self.index}: {exc!r}")
                return

    def _plan(self, key: Key, batch_id: int, in_batch: bool) -> Planned:
        self.sequence += 1
        current = self.acked[key]
        new = {
            "v": self.sequence,
            "c": self.index,
            "b": batch_id,
            "pad": "x" * self.rng.choice(PADDING),
        }
        pk, rk = key
        target = TABLE + py_keys(pk, rk)
        if current.props is None:
            kind = self.rng.choice(["insert", "insert", "upsert_replace", "upsert_merge"])
        else:
            kinds = ["replace", "merge_patch", "merge_verb", "upsert_replace", "upsert_merge", "delete"]
            kind = self.rng.choice(kinds)
        if_match = {"If-Match": current.etag or "*"}
        if kind == "insert":
            body = {"PartitionKey": pk, "RowKey": rk, **new}
            return Planned(key, kind, "POST", TABLE, {}, body, new)
        if kind == "upsert_replace":
            return Planned(key, kind, "PUT", target, {}, new, new)
        if kind == "upsert_merge":
            merged = {**(current.props or {}), **new}
            return Planned(key, kind, "PATCH" if in_batch else "MERGE", target, {}, new, merged)
        if kind == "replace":
            return Planned(key, kind, "PUT", target, if_match, new, new)
        if kind in ("merge_patch", "merge_verb"):
            method = "MERGE" if kind == "merge_verb" else "PATCH"
            return Planned(key, kind, method, target, if_match, new, {**(current.props or {}), **new})
        return Planned(key, "delete", "DELETE", target, if_match, None, None)

    def _single(self, client: RawClient) -> None:
        key = self.rng.choice(self.keys)
        op = self._plan(key, 0, in_batch=False)
        self.in_flight = InFlight({key: op.outcome}, is_batch=False)
        try:
            response = client.request(op.method, op.target, op.body, op.headers)
        except CONNECTION_ERRORS:
            return  # the server died: the outcome is unknown until it is read back
        expected = {"insert": 201, "delete": 204}.get(op.kind, 204)
        if response.status != expected:
            self.anomalies.append(f"client {self.index} {op.kind} {key}: {response!r}")
            return
        etag = response.header("etag")
        if op.kind != "delete" and not etag:
            self.anomalies.append(f"client {self.index} {op.kind} {key}: no ETag in {response!r}")
            return
        self.acked[key] = Version(op.outcome, etag if op.outcome is not None else None)
        self.in_flight = None
        self.stats.acked_writes += 1

    def _batch(self, client: RawClient) -> None:
        partition = self.rng.randrange(PARTITIONS_PER_CLIENT)
        rows = self.keys[partition * ROWS_PER_PARTITION : (partition + 1) * ROWS_PER_PARTITION]
        self.batch_ids += 1
        batch_id = self.index * 1_000_000 + self.batch_ids
        ops = [
            self._plan(key, batch_id, in_batch=True) for key in self.rng.sample(rows, self.rng.randint(2, 4))
        ]
        self.in_flight = InFlight({op.key: op.outcome for op in ops}, is_batch=True)
        batch_ops = [
            BatchOp(op.method, op.target, op.headers, op.body if op.body is None else dict(op.body))
            for op in ops
        ]
        try:
            response = send_batch(client, batch_ops)
        except CONNECTION_ERRORS:
            return
        if response.status != 202:
            self.anomalies.append(f"client {self.index} batch {batch_id}: {response!r}")
            return
        parts = parse_batch_response(response)
        statuses = [part.status for part in parts]
        expected = [201 if op.kind == "insert" else 204 for op in ops]
        if statuses != expected:
            self.anomalies.append(f"client {self.index} batch {batch_id}: parts {statuses}: {response!r}")
            return
        for op, part in zip(ops, parts, strict=True):
            etag = part.headers.get("etag")
            if op.outcome is not None and not etag:
                self.anomalies.append(f"client {self.index} batch {batch_id}: no ETag for {op.key}")
                return
            self.acked[op.key] = Version(op.outcome, etag if op.outcome is not None else None)
        self.in_flight = None
        self.stats.acked_writes += len(ops)
        self.stats.batched_writes += len(ops)
        self.stats.acked_batches += 1

    # ---------------------------------------------------------------------------- checking

    def verify(self, actual: dict[Key, tuple[str, dict[str, Any]]]) -> list[str]:
        """Compare the store with the ledger; adopt what was found as the new acknowledged state."""
        problems: list[str] = []
        pending = self.in_flight.outcomes if self.in_flight else {}
        applied: dict[Key, bool] = {}
        for key in self.keys:
            self.stats.keys_compared += 1
            found = actual.get(key)
            acked = self.acked[key]
            is_acked = (found is None and acked.props is None) or (
                found is not None and acked.props is not None and found == (acked.etag, acked.props)
            )
            if key in pending:
                outcome = pending[key]
                is_new = (found is None and outcome is None) or (
                    found is not None
                    and outcome is not None
                    and found[1] == outcome
                    and (acked.props is None or found[0] != acked.etag)
                )
                if is_acked:
                    applied[key] = False
                elif is_new:
                    applied[key] = True
                else:
                    problems.append(
                        f"client {self.index} {key}: found {found}, expected the acknowledged "
                        f"{acked} or the in-flight {outcome}"
                    )
            elif not is_acked:
                problems.append(f"client {self.index} {key}: acknowledged {acked}, found {found}")
            self.acked[key] = Version(found[1], found[0]) if found is not None else Version()
        if self.in_flight is not None:
            self.stats.in_flight_writes += len(pending)
            self.stats.in_flight_applied += sum(applied.values())
            if self.in_flight.is_batch and len(set(applied.values())) > 1:
                problems.append(f"client {self.index}: half a batch was applied: {applied}")
        self.in_flight = None
        return problems


def _read_back(client: RawClient) -> dict[Key, tuple[str, dict[str, Any]]]:
    return entity_map(query_all(client, TABLE))


def _verify_all(
    clients: list[LoadClient], server: IsolatedServer, report: CrashReport, stats: CycleStats
) -> None:
    actual = _read_back(server.raw())
    owned = {key for client in clients for key in client.keys}
    for key in sorted(set(actual) - owned):
        report.violations.append(f"a key nobody wrote exists: {key}")
    for client in clients:
        report.violations.extend(client.verify(actual))
        report.violations.extend(client.anomalies)
        client.anomalies = []
        for name in vars(stats):
            setattr(stats, name, getattr(stats, name) + getattr(client.stats, name))
        client.stats = CycleStats()


def run_crash_cycles(
    data_dir: Path,
    cycles: int,
    *,
    clients: int = 6,
    seed: int | None = None,
    min_delay: float = 0.1,
    max_delay: float = 1.2,
    workers: tuple[int, ...] = (1, 2),
    log_path: Path | None = None,
    progress: Callable[[str], None] | None = None,
    stop_on_violation: bool = True,
) -> CrashReport:
    """Run ``cycles`` kill/restart/verify cycles on ``data_dir`` and report what was checked."""
    seed = random.randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    report = CrashReport()
    load = [LoadClient(index, rng.randrange(2**32)) for index in range(clients)]
    server = IsolatedServer(data_dir, ["--workers", str(workers[0])], log_path=log_path)
    server.start()
    try:
        created = server.raw().create_table(TABLE)
        assert created.status in (201, 409), created
        _verify_all(load, server, report, CycleStats())  # a new store: the table must be empty
        for cycle in range(cycles):
            stop = threading.Event()
            threads = [
                threading.Thread(target=c.run, args=(server.port, stop), name=f"load-{c.index}", daemon=True)
                for c in load
            ]
            for thread in threads:
                thread.start()
            delay = rng.uniform(min_delay, max_delay)
            time.sleep(delay)
            server.kill()
            stop.set()
            for thread in threads:
                thread.join(60)
                assert not thread.is_alive(), "a load client hung after the server was killed"
            image = crash_image_integrity(data_dir)
            if image != "ok":
                report.violations.append(f"cycle {cycle + 1}: the crash image fails integrity_check: {image}")
            server.extra_args = ["--workers", str(workers[(cycle + 1) % len(workers)])]
            server.start()
            stats = CycleStats()
            before = len(report.violations)
            _verify_all(load, server, report, stats)
            report.cycles += 1
            report.add(stats)
            if progress is not None:
                progress(
                    f"cycle {cycle + 1}/{cycles}: killed after {delay:.2f}s; {stats.acked_writes} writes "
                    f"acknowledged ({stats.acked_batches} batches), {stats.in_flight_writes} in flight "
                    f"({stats.in_flight_applied} applied), {stats.keys_compared} keys compared, "
                    f"image {image}, violations {len(report.violations) - before}"
                )
            if report.violations and stop_on_violation:
                break
        server.stop()
        final = integrity_check(data_dir / "tabulae.db")
        if final != "ok":
            report.violations.append(f"integrity_check after a graceful stop: {final}")
    finally:
        server.kill()
    return report


@pytest.mark.timeout(120)
def test_sigkill_under_mixed_load_loses_no_acknowledged_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = random.randrange(2**32)
    report = run_crash_cycles(tmp_path / "data", 5, seed=seed, log_path=tmp_path / "server.log")
    with capsys.disabled():
        print(f"\n[crash] seed {seed}: {report.summary()}")
    assert report.violations == [], f"seed {seed}:\n" + "\n".join(report.violations[:50])
    assert report.cycles == 5
    assert report.acked_writes > 0 and report.acked_batches > 0
    assert report.keys_compared >= 5 * 6 * PARTITIONS_PER_CLIENT * ROWS_PER_PARTITION


def test_the_ledger_detects_lost_writes_half_batches_and_strangers() -> None:
    """The verifier itself: it must flag every kind of damage the crash test looks for."""
    client = LoadClient(0, seed=1)
    a, b, c = client.keys[0], client.keys[1], client.keys[2]
    client.acked[a] = Version({"v": 1}, 'W/"1"')
    client.acked[b] = Version({"v": 2}, 'W/"2"')
    intact = {a: ('W/"1"', {"v": 1}), b: ('W/"2"', {"v": 2})}
    assert client.verify(dict(intact)) == []

    lost = client.verify({a: ('W/"1"', {"v": 1})})  # b's acknowledged write vanished
    assert len(lost) == 1 and str(b) in lost[0]

    client.acked[b] = Version({"v": 2}, 'W/"2"')
    stale_etag = client.verify({**intact, a: ('W/"0"', {"v": 1})})
    assert len(stale_etag) == 1 and str(a) in stale_etag[0]

    client.acked[a] = Version({"v": 1}, 'W/"1"')
    client.in_flight = InFlight({a: {"v": 3}, c: {"v": 4}}, is_batch=True)
    half = client.verify({**intact, c: ('W/"9"', {"v": 4})})  # c written, a not
    assert any("half a batch" in problem for problem in half)

    client.in_flight = InFlight({a: {"v": 5}, c: None}, is_batch=True)
    whole = client.verify({b: intact[b], a: ('W/"7"', {"v": 5})})  # a updated, c deleted: all applied
    assert whole == [] and client.stats.in_flight_applied == 3

    client.in_flight = InFlight({a: {"v": 6}}, is_batch=False)
    garbage = client.verify({a: ('W/"8"', {"v": 99}), b: intact[b]})
    assert len(garbage) == 1 and "in-flight" in garbage[0]
