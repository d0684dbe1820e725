"""Concurrency (issue #7): optimistic concurrency loses no update, and racing table and entity
creation stays consistent, through ``--workers 2`` (two processes sharing one SQLite store).

* 16 clients increment a counter on one entity (read, then ``MERGE`` with If-Match, retry on
  412): the final value equals the number of successful updates, every successful update wrote
  a different value (1, 2, 3, … with no value twice: two winners from one read would be a lost
  update) and got a different ETag.
* The same with batches: each batch increments the counters of 3 rows of one partition with
  If-Match on each; all three counters end equal to the number of successful batches.
* 16 clients create and delete the same tables (names differing in case collide, as on Azure):
  every create is 201/204 or 409, every delete 204 or 404, never a 5xx; per table the successful
  creates and deletes alternate, so their difference is 0 or 1 and says whether it exists at the
  end.
* 16 clients insert the same entity at once: exactly one 201, the others 409.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rawhttp import RawClient, py_keys
from tests.system.test_reliability_support import (
    BatchOp,
    IsolatedServer,
    azure_error_code,
    parse_batch_response,
    query_all,
    send_batch,
    wait_for_workers,
)

CLIENTS = 16
INCREMENTS_PER_CLIENT = 6
BATCH_CLIENTS = 8
BATCHES_PER_CLIENT = 4
MAX_ATTEMPTS = 5000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IsolatedServer]:
    base = tmp_path_factory.mktemp("concurrency")
    process = IsolatedServer(base / "data", ["--workers", "2"], log_path=base / "server.log").start()
    wait_for_workers(process, 2)
    yield process
    process.stop()
    assert "Traceback" not in process.log_text(), process.log_tail()


def run_clients(
    count: int, body: Callable[[int, RawClient, threading.Barrier], None], port: int
) -> list[str]:
    """Run ``body`` on ``count`` threads started together; return the errors they raised."""
    barrier = threading.Barrier(count)
    errors: list[str] = []

    def main(index: int) -> None:
        try:
            body(index, RawClient(port), barrier)
        except BaseException as exc:
            errors.append(f"client {index}: {exc!r}")
            barrier.abort()

    threads = [
        threading.Thread(target=main, args=(i,), name=f"client-{i}", daemon=True) for i in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), f"{thread.name} hung"
    return errors


@pytest.mark.timeout(120)
def test_if_match_increments_lose_no_update(server: IsolatedServer) -> None:
    raw = server.raw()
    table = "counterone"
    assert raw.create_table(table).status == 201
    assert raw.insert(table, {"PartitionKey": "c", "RowKey": "c", "counter": 0}).status == 201
    target = table + py_keys("c", "c")
    wins: list[tuple[int, str]] = []
    conflicts = Counter[int]()
    lock = threading.Lock()

    def client(index: int, http: RawClient, barrier: threading.Barrier) -> None:
        barrier.wait()
        done = 0
        for _attempt in range(MAX_ATTEMPTS):
            current = http.request("GET", target)
            assert current.status == 200, current
            value = current.json()["counter"]
            update = {"counter": value + 1, "by": index}
            response = http.request("MERGE", target, update, {"If-Match": current.header("etag")})
            if response.status == 412:
                assert azure_error_code(response) == "UpdateConditionNotSatisfied"
                with lock:
                    conflicts[index] += 1
                continue
            assert response.status == 204 and response.header("etag"), response
            with lock:
                wins.append((value + 1, response.header("etag") or ""))
            done += 1
            if done == INCREMENTS_PER_CLIENT:
                return
        raise AssertionError(f"only {done} increments in {MAX_ATTEMPTS} attempts")

    errors = run_clients(CLIENTS, client, server.port)
    assert errors == []
    final = raw.request("GET", target)
    assert final.status == 200
    assert final.json()["counter"] == len(wins) == CLIENTS * INCREMENTS_PER_CLIENT
    assert sorted(value for value, _ in wins) == list(range(1, len(wins) + 1)), "a value was written twice"
    assert len({etag for _, etag in wins}) == len(wins), "two updates got the same ETag"
    assert sum(conflicts.values()) > 0, "no client ever raced another: the test did not test anything"


@pytest.mark.timeout(120)
def test_if_match_batches_lose_no_update(server: IsolatedServer) -> None:
    raw = server.raw()
    table = "counterbatch"
    rows = ["a", "b", "c"]
    assert raw.create_table(table).status == 201
    for row in rows:
        assert raw.insert(table, {"PartitionKey": "p", "RowKey": row, "counter": 0}).status == 201
    wins: list[int] = []
    lock = threading.Lock()

    def client(index: int, http: RawClient, barrier: threading.Barrier) -> None:
        barrier.wait()
        done = 0
        for _attempt in range(MAX_ATTEMPTS):
            current = {e["RowKey"]: e for e in query_all(http, table, "$filter=PartitionKey%20eq%20'p'")}
            values = {row: current[row]["counter"] for row in rows}
            assert len(set(values.values())) == 1, f"rows of one batch disagree: {values}"
            ops = [
                BatchOp(
                    "MERGE",
                    table + py_keys("p", row),
                    {"If-Match": current[row]["odata.etag"]},
                    {"counter": values[row] + 1, "by": index},
                )
                for row in random.sample(rows, len(rows))
            ]
            response = send_batch(http, ops)
            parts = parse_batch_response(response)
            if len(parts) == 1 and parts[0].status == 412:
                continue
            assert [part.status for part in parts] == [204, 204, 204], response
            with lock:
                wins.append(values["a"] + 1)
            done += 1
            if done == BATCHES_PER_CLIENT:
                return
        raise AssertionError(f"only {done} batches in {MAX_ATTEMPTS} attempts")

    errors = run_clients(BATCH_CLIENTS, client, server.port)
    assert errors == []
    final = {e["RowKey"]: e["counter"] for e in query_all(raw, table)}
    assert final == dict.fromkeys(rows, len(wins))
    assert len(wins) == BATCH_CLIENTS * BATCHES_PER_CLIENT
    assert sorted(wins) == list(range(1, len(wins) + 1)), "a batch value was written twice"


@pytest.mark.timeout(120)
def test_racing_table_creates_and_deletes_stay_consistent(server: IsolatedServer) -> None:
    names = ["racetable", "RaceTable", "RACETABLE", "racetwo", "RaceTwo"]
    outcomes: list[tuple[str, str, int, str | None]] = []
    lock = threading.Lock()

    def client(index: int, http: RawClient, barrier: threading.Barrier) -> None:
        rng = random.Random(index)
        barrier.wait()
        for _ in range(12):
            name = rng.choice(names)
            if rng.random() < 0.5:
                response = http.create_table(name)
                allowed = {201, 204, 409}
                action = "create"
            else:
                response = http.request("DELETE", f"Tables('{name}')")
                allowed = {204, 404}
                action = "delete"
            code = azure_error_code(response) if response.status >= 400 else None
            assert response.status in allowed, f"{action} {name}: {response!r}"
            if response.status == 409:
                assert code in ("TableAlreadyExists", "TableBeingDeleted"), response
            if response.status == 404:
                assert code in ("ResourceNotFound", "TableNotFound"), response
            with lock:
                outcomes.append((action, name.lower(), response.status, code))

    errors = run_clients(CLIENTS, client, server.port)
    assert errors == []
    raw = server.raw()
    listed = {name.lower() for name in (t["TableName"] for t in raw.request("GET", "Tables").json()["value"])}
    for key in {name.lower() for name in names}:
        created = sum(1 for a, n, s, _ in outcomes if n == key and a == "create" and s in (201, 204))
        deleted = sum(1 for a, n, s, _ in outcomes if n == key and a == "delete" and s == 204)
        exists = raw.request("GET", f"Tables('{key}')").status == 200
        assert created - deleted == int(exists), (
            f"{key}: {created} creates, {deleted} deletes, exists={exists}"
        )
        assert (key in listed) == exists
        if exists:  # the survivor is a working table
            response = raw.insert(key, {"PartitionKey": "p", "RowKey": "r"})
            assert response.status == 201, response
    assert len(outcomes) == CLIENTS * 12


@pytest.mark.timeout(120)
def test_racing_inserts_of_one_entity_have_exactly_one_winner(server: IsolatedServer) -> None:
    raw = server.raw()
    table = "insertrace"
    assert raw.create_table(table).status == 201
    results: dict[int, list[tuple[int, Any]]] = {round_: [] for round_ in range(8)}
    lock = threading.Lock()

    def client(index: int, http: RawClient, barrier: threading.Barrier) -> None:
        for round_ in range(8):
            barrier.wait()
            response = http.insert(table, {"PartitionKey": "same", "RowKey": f"r{round_}", "by": index})
            assert response.status in (201, 409), response
            if response.status == 409:
                assert azure_error_code(response) == "EntityAlreadyExists"
            with lock:
                results[round_].append((response.status, index))

    errors = run_clients(CLIENTS, client, server.port)
    assert errors == []
    stored = {e["RowKey"]: e["by"] for e in query_all(raw, table)}
    for round_, answers in results.items():
        winners = [index for status, index in answers if status == 201]
        assert len(winners) == 1, f"round {round_}: {len(winners)} inserts of one entity succeeded"
        assert stored[f"r{round_}"] == winners[0]


def test_server_log_is_clean(server: IsolatedServer, tmp_path: Path) -> None:
    """Nothing above made a worker log an unexpected exception or die."""
    assert server.alive()
    assert len(server.worker_pids()) == 2
    assert "Traceback" not in server.log_text(), server.log_tail()
