"""Crash safety of the Queue service: SIGKILL at random moments under load loses no acknowledged
message, brings back no deleted one, and gives back every message being processed.

Producers put messages with unique texts; consumers take one to four at a time for one second
and delete most of them, leaving the rest to reappear. Each keeps a ledger: puts and deletes
acknowledged (2xx), the one request in flight, and how many takes of each message were
acknowledged. A cycle runs the load, SIGKILLs the whole server (supervisor and workers at once)
after a random delay, checks the crash image with ``PRAGMA integrity_check`` (on a copy),
restarts the server on the same data (alternating ``--workers 1`` and ``--workers 2``), waits out
the visibility timeouts and drains the queue. Then:

* every acknowledged put whose delete was neither acknowledged nor in flight is there, exactly
  once, dequeued at least once more than its acknowledged takes (so a taken message came back);
* no message whose delete was acknowledged is there;
* nothing is there that no producer sent.

The drain deletes what it finds, so every cycle starts from an empty queue.
"""

from __future__ import annotations

import random
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.queuehttp import BOM, QueueHttp, message_body
from tests.serverproc import free_port
from tests.system.test_reliability_support import (
    CONNECTION_ERRORS,
    IsolatedServer,
    crash_image_integrity,
    integrity_check,
)

QUEUE = "crashsafety"
VISIBILITY = 1  # seconds a consumer holds what it takes


@dataclass
class Ledger:
    """What the clients know of the queue since the last drain."""

    put_acked: set[str] = field(default_factory=set)
    put_in_flight: set[str] = field(default_factory=set)
    deleted_acked: set[str] = field(default_factory=set)
    delete_in_flight: set[str] = field(default_factory=set)
    takes_acked: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def messages_of(body: bytes) -> list[tuple[str, str, str, int]]:
    """(text, id, receipt, dequeue count) of each message of a Get Messages answer."""
    root = ET.fromstring(body[len(BOM) :])
    return [
        (
            m.findtext("MessageText") or "",
            m.findtext("MessageId") or "",
            m.findtext("PopReceipt") or "",
            int(m.findtext("DequeueCount") or 0),
        )
        for m in root
    ]


def produce(http: QueueHttp, client: int, ledger: Ledger, stop: threading.Event) -> None:
    sequence = 0
    while not stop.is_set():
        sequence += 1
        text = f"c{client}-{sequence}"
        with ledger.lock:
            ledger.put_in_flight.add(text)
        try:
            response = http.request("POST", f"/{QUEUE}/messages", message_body(text))
        except CONNECTION_ERRORS:
            return  # the server died: the put may or may not have happened
        with ledger.lock:
            ledger.put_in_flight.discard(text)
            if response.status == 201:
                ledger.put_acked.add(text)
            else:
                ledger.anomalies.append(f"put {text}: {response!r}")
                return


def consume(http: QueueHttp, seed: int, ledger: Ledger, stop: threading.Event) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            response = http.request(
                "GET", f"/{QUEUE}/messages?numofmessages={rng.randint(1, 4)}&visibilitytimeout={VISIBILITY}"
            )
        except CONNECTION_ERRORS:
            return
        if response.status != 200:
            with ledger.lock:
                ledger.anomalies.append(f"get: {response!r}")
            return
        taken = messages_of(response.body)
        with ledger.lock:
            for text, *_rest in taken:
                ledger.takes_acked[text] = ledger.takes_acked.get(text, 0) + 1
        for text, message_id, receipt, _count in taken:
            if rng.random() < 0.3:
                continue  # "crash" while processing it: it must come back
            with ledger.lock:
                ledger.delete_in_flight.add(text)
            try:
                deleted = http.request(
                    "DELETE", f"/{QUEUE}/messages/{message_id}?popreceipt={quote(receipt, safe='')}"
                )
            except CONNECTION_ERRORS:
                return
            with ledger.lock:
                ledger.delete_in_flight.discard(text)
                if deleted.status == 204:
                    ledger.deleted_acked.add(text)
                elif deleted.status != 404:  # 404: it reappeared and someone else took it meanwhile
                    ledger.anomalies.append(f"delete {text}: {deleted!r}")


def drain(http: QueueHttp) -> dict[str, int]:
    """Take and delete everything; text -> dequeue count when found. Duplicates are violations."""
    found: dict[str, int] = {}
    duplicates: list[str] = []
    while True:
        response = http.request("GET", f"/{QUEUE}/messages?numofmessages=32&visibilitytimeout=300")
        assert response.status == 200, response
        taken = messages_of(response.body)
        if not taken:
            break
        for text, message_id, receipt, count in taken:
            if text in found:
                duplicates.append(text)
            found[text] = count
            deleted = http.request(
                "DELETE", f"/{QUEUE}/messages/{message_id}?popreceipt={quote(receipt, safe='')}"
            )
            assert deleted.status == 204, deleted
    assert not duplicates, f"messages found twice: {duplicates}"
    return found


def verify(ledger: Ledger, found: dict[str, int]) -> list[str]:
    problems = list(ledger.anomalies)
    must_be_there = ledger.put_acked - ledger.deleted_acked - ledger.delete_in_flight
    for text in sorted(must_be_there):
        if text not in found:
            problems.append(f"acknowledged message {text} was lost")
        elif found[text] < ledger.takes_acked.get(text, 0) + 1:
            problems.append(f"{text}: dequeue count {found[text]} after {ledger.takes_acked[text]} takes")
    for text in sorted(ledger.deleted_acked & set(found)):
        problems.append(f"deleted message {text} came back")
    for text in sorted(set(found) - ledger.put_acked - ledger.put_in_flight):
        problems.append(f"unknown message {text}")
    return problems


@dataclass
class Report:
    cycles: int = 0
    puts: int = 0
    deletes: int = 0
    held: int = 0  # messages taken but neither deleted nor drained before the kill: must reappear
    violations: list[str] = field(default_factory=list)


def run_queue_crash_cycles(data_dir: Path, cycles: int, seed: int, log_path: Path) -> Report:
    rng = random.Random(seed)
    report = Report()
    queue_port = free_port()
    flags = ["--services", "table,queue", "--queue-port", str(queue_port)]
    server = IsolatedServer(data_dir, [*flags, "--workers", "1"], log_path=log_path)
    server.start()
    http = QueueHttp(queue_port)
    try:
        assert http.request("PUT", f"/{QUEUE}").status in (201, 204)
        for cycle in range(cycles):
            ledger = Ledger()
            stop = threading.Event()
            threads = [threading.Thread(target=produce, args=(http, i, ledger, stop)) for i in range(3)] + [
                threading.Thread(target=consume, args=(http, rng.randrange(2**32), ledger, stop))
                for _ in range(3)
            ]
            for thread in threads:
                thread.start()
            time.sleep(rng.uniform(0.4, 1.5))
            server.kill()
            stop.set()
            for thread in threads:
                thread.join(60)
            image = crash_image_integrity(data_dir)
            if image != "ok":
                report.violations.append(f"cycle {cycle + 1}: crash image fails integrity_check: {image}")
            server.extra_args = [*flags, "--workers", str(1 + (cycle + 1) % 2)]
            server.start()
            time.sleep(VISIBILITY + 0.5)  # every message taken before the kill is visible again
            found = drain(http)
            problems = verify(ledger, found)
            report.violations.extend(f"cycle {cycle + 1}: {problem}" for problem in problems)
            report.cycles += 1
            report.puts += len(ledger.put_acked)
            report.deletes += len(ledger.deleted_acked)
            report.held += len([t for t in ledger.takes_acked if t in found])
            if report.violations:
                break
        server.stop()
        final = integrity_check(data_dir / "tabulae.db")
        if final != "ok":
            report.violations.append(f"integrity_check after a graceful stop: {final}")
    finally:
        server.kill()
    return report


@pytest.mark.timeout(180)
def test_sigkill_loses_no_acknowledged_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = random.randrange(2**32)
    report = run_queue_crash_cycles(tmp_path / "data", 4, seed, tmp_path / "server.log")
    with capsys.disabled():
        print(
            f"\n[queue crash] seed {seed}: {report.cycles} cycles, {report.puts} puts and {report.deletes} "
            f"deletes acknowledged, {report.held} taken messages came back; "
            f"violations {len(report.violations)}"
        )
    assert report.violations == [], f"seed {seed}:\n" + "\n".join(report.violations[:50])
    assert report.cycles == 4 and report.puts > 0 and report.deletes > 0 and report.held > 0


def test_the_ledger_catches_lost_resurrected_and_unknown_messages() -> None:
    ledger = Ledger(put_acked={"a", "b", "c"}, deleted_acked={"c"}, takes_acked={"a": 2})
    assert verify(ledger, {"a": 3, "b": 1}) == []
    problems = verify(ledger, {"a": 2, "c": 1, "z": 1})
    assert any("b was lost" in p for p in problems)
    assert any("dequeue count 2 after 2" in p for p in problems)
    assert any("c came back" in p for p in problems)
    assert any("unknown message z" in p for p in problems)
