"""Scalability targets, fault injection and ``/metrics``, through real server processes (issue #9).

The contract these tests hold the server to:

* ``tabulae serve --targets azure`` enforces 2,000 entities/s per partition and 20,000 per
  account; ``--partition-target N`` and ``--account-target N`` change the numbers (small ones
  keep these tests fast). Over target a request gets Azure's 503 ``ServerBusy`` (the account
  message when the account is over) or, for a query across partitions, 500
  ``OperationTimedOut``, and applies nothing.
* ``--faults P`` (``--faults-seed S``) injects transient 503/500 answers and partition-moved
  windows; the data is never affected.
* ``GET /metrics`` (Prometheus text) and ``GET /metrics?format=json`` (the insight snapshot),
  unauthenticated, at the server root.

Every server here runs one worker (``--workers 1``), so one process sees all the traffic and
enforces the whole target. Throttling is provoked with batches larger than a partition's burst:
a batch of 100 on a full bucket of 100 (or less) leaves nothing for a request sent right after
it, however slow the machine, so no assertion depends on timing.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, TableServiceClient, TableTransactionError, UpdateMode
from prometheus_client.parser import text_string_to_metric_families

from tabulae.tools.stress import VERDICT_AT, run_stress
from tests.rawhttp import RawClient, assert_error, sdk_error_code
from tests.serverproc import ServerProcess

SERVER_BUSY = "The server is currently unable to receive requests. Please retry your request."
ACCOUNT_OVER = "Operations per second is over the account limit."
TIMED_OUT = "Operation could not be completed within the specified time."

Launcher = Callable[..., ServerProcess]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launcher]:
    """Start servers of the test's own with extra flags; all stopped afterwards."""
    servers: list[ServerProcess] = []

    def start(*flags: str) -> ServerProcess:
        server = ServerProcess(
            tmp_path / f"data{len(servers)}", extra_args=["--in-memory", "--workers", "1", *flags]
        )
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.stop()


class StatusLog:
    """A response hook: every HTTP attempt the SDK makes, retries included."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[int, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, response: Any) -> None:
        http_response = response.http_response
        code = http_response.headers.get("x-ms-error-code", "")
        with self._lock:
            self.seen[(int(http_response.status_code), code)] += 1

    def count(self, status: int) -> int:
        return sum(n for (s, _code), n in self.seen.items() if s == status)


def table_client(server: ServerProcess, table: str, **options: Any) -> TableClient:
    return TableClient.from_connection_string(server.connection_string, table, **options)


def batch(pk: str, rows: list[str], kind: str = "create") -> list[Any]:
    return [(kind, {"PartitionKey": pk, "RowKey": rk, "n": i}) for i, rk in enumerate(rows)]


def get_metrics(server: ServerProcess, query: str = "") -> tuple[int, str, bytes]:
    """An unauthenticated GET at the server root."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", "/metrics" + query)
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        conn.close()


def prometheus(server: ServerProcess) -> list[tuple[str, dict[str, str], float]]:
    status, content_type, body = get_metrics(server)
    assert status == 200, body
    assert content_type.startswith("text/plain"), content_type
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for sample in family.samples
    ]


def metric_sum(found: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    return sum(v for n, lab, v in found if n == name and all(lab.get(k) == x for k, x in labels.items()))


def snapshot(server: ServerProcess) -> dict[str, Any]:
    status, content_type, body = get_metrics(server, "?format=json")
    assert status == 200, body
    assert content_type.startswith("application/json"), content_type
    document: dict[str, Any] = json.loads(body)
    return document


def table_entry(document: dict[str, Any], table: str) -> dict[str, Any]:
    (entry,) = [t for t in document["tables"] if t["table"].lower() == table]
    return entry


def assert_azure_error_body(response: Any, status: int, code: str, message: str) -> None:
    """Status, code, ``x-ms-error-code`` and the exact JSON error body shape."""
    assert_error(response, status, code, message)
    body = response.json()
    assert list(body) == ["odata.error"]
    assert list(body["odata.error"]) == ["code", "message"]
    assert body["odata.error"]["message"]["lang"] == "en-US"
    value = body["odata.error"]["message"]["value"]
    assert value.startswith(message + "\nRequestId:" + response.header("x-ms-request-id") + "\nTime:")


# --------------------------------------------------------------------------- refusals on the wire


def test_partition_over_target_gets_server_busy(launch: Launcher) -> None:
    server = launch("--targets", "azure", "--partition-target", "1", "--account-target", "100000")
    raw = RawClient(server.port)
    assert raw.create_table("burst").status == 201
    with table_client(server, "burst", retry_total=0) as client:
        client.submit_transaction(batch("p", [f"a{i:02d}" for i in range(100)]))  # passes, 99 s of debt
    refused = raw.insert("burst", {"PartitionKey": "p", "RowKey": "late"})
    assert_azure_error_body(refused, 503, "ServerBusy", SERVER_BUSY)
    # another partition of the same table is not affected
    assert raw.insert("burst", {"PartitionKey": "q", "RowKey": "fine"}).status == 201


def test_account_over_target_gets_server_busy_and_scans_time_out(launch: Launcher) -> None:
    server = launch("--targets", "azure", "--partition-target", "100000", "--account-target", "2")
    raw = RawClient(server.port)
    assert raw.create_table("busy").status == 201
    with table_client(server, "busy", retry_total=0) as client:
        client.submit_transaction(batch("p", [f"a{i:02d}" for i in range(100)]))
    refused = raw.insert("busy", {"PartitionKey": "other", "RowKey": "x"})
    assert_azure_error_body(refused, 503, "ServerBusy", ACCOUNT_OVER)
    scan = raw.request("GET", "busy()")  # a query across partitions
    assert_azure_error_body(scan, 500, "OperationTimedOut", TIMED_OUT)
    found = prometheus(server)
    assert metric_sum(found, "tabulae_throttled_total", table="busy") == 2


def test_a_refused_request_applies_nothing(launch: Launcher) -> None:
    server = launch("--targets", "azure", "--partition-target", "1", "--account-target", "100000")
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        service.create_table("nothing")
    with table_client(server, "nothing", retry_total=0) as client:
        client.submit_transaction(batch("p", [f"a{i:02d}" for i in range(100)]))
        attempts: list[Callable[[], Any]] = [
            lambda: client.submit_transaction(batch("p", [f"b{i}" for i in range(10)])),
            lambda: client.submit_transaction(batch("p", ["a00", "a01"], "delete")),
            lambda: client.create_entity({"PartitionKey": "p", "RowKey": "single"}),
            lambda: client.upsert_entity(
                {"PartitionKey": "p", "RowKey": "a05", "n": -1}, mode=UpdateMode.REPLACE
            ),
            lambda: client.delete_entity("p", "a07"),
        ]
        for attempt in attempts:
            with pytest.raises(HttpResponseError) as caught:
                attempt()
            # refused as a whole request (a batch too: not a 202 with a failing part), so SDKs retry
            assert not isinstance(caught.value, TableTransactionError)
            assert caught.value.status_code == 503
            assert sdk_error_code(caught.value) == "ServerBusy"
        rows = {e["RowKey"]: e["n"] for e in client.list_entities()}  # a table scan: account only
    assert rows == {f"a{i:02d}": i for i in range(100)}
    found = prometheus(server)
    assert metric_sum(found, "tabulae_throttled_total", table="nothing", partition="p") == len(attempts)
    assert metric_sum(found, "tabulae_entities_written_total", table="nothing") == 100


# --------------------------------------------------------------------------- the SDK copes


def test_sdk_retries_through_throttling_and_nothing_is_duplicated_or_lost(launch: Launcher) -> None:
    server = launch("--targets", "azure", "--partition-target", "100", "--account-target", "1000")
    log = StatusLog()
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        service.create_table("retried")
    expected: set[str] = set()
    with table_client(server, "retried", raw_response_hook=log) as client:  # the default retry policy
        for n in range(3):  # each batch drains the partition's whole burst
            rows = [f"b{n}-{i:03d}" for i in range(100)]
            client.submit_transaction(batch("hot", rows))
            expected.update(rows)
    assert log.count(503) >= 2  # batches 2 and 3 were refused at first
    assert set(log.seen) <= {(202, ""), (503, "ServerBusy")}

    errors: list[BaseException] = []

    def burst(thread: int) -> None:
        try:
            with table_client(server, "retried", raw_response_hook=log) as client:
                for i in range(25):
                    client.create_entity({"PartitionKey": "hot", "RowKey": f"s{thread}-{i:02d}"})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=burst, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected.update(f"s{t}-{i:02d}" for t in range(4) for i in range(25))
    with table_client(server, "retried") as client:
        keys = [e["RowKey"] for e in client.list_entities()]
    assert len(keys) == len(set(keys)) == 400
    assert set(keys) == expected
    found = prometheus(server)
    assert metric_sum(found, "tabulae_entities_written_total", table="retried") == 400
    assert metric_sum(found, "tabulae_throttled_total", table="retried") == log.count(503)


def test_faults_never_lose_or_duplicate_data(launch: Launcher) -> None:
    server = launch("--faults", "0.3", "--faults-seed", "11")
    log = StatusLog()
    patient = {
        "retry_total": 40,
        "retry_status": 40,
        "retry_backoff_factor": 0.05,
        "retry_backoff_max": 1.0,  # keeps polling through a partition-moved window of up to 3 s
        "raw_response_hook": log,
    }
    with TableServiceClient.from_connection_string(server.connection_string, **patient) as service:
        service.create_table("faulty")
    with table_client(server, "faulty", **patient) as client:
        for i in range(40):
            client.create_entity({"PartitionKey": f"p{i % 4}", "RowKey": f"r{i:02d}", "n": i})
        for i in range(10):
            client.update_entity({"PartitionKey": f"p{i % 4}", "RowKey": f"r{i:02d}", "n": 100 + i})
        for i in range(35, 40):
            client.delete_entity(f"p{i % 4}", f"r{i:02d}")
        client.submit_transaction(batch("p9", [f"x{i}" for i in range(20)]))
        rows = {e["RowKey"]: e["n"] for e in client.list_entities()}
        assert client.get_entity("p1", "r01")["n"] == 101
    expected = {f"r{i:02d}": (100 + i if i < 10 else i) for i in range(35)}
    expected.update({f"x{i}": i for i in range(20)})
    assert rows == expected
    faults = log.count(500) + log.count(503)
    assert faults > 0
    codes = {code for (status, code) in log.seen if status >= 500}
    assert codes <= {"ServerBusy", "InternalError", "OperationTimedOut"}


# --------------------------------------------------------------------------- /metrics


def test_metrics_match_a_known_workload(launch: Launcher) -> None:
    server = launch("--targets", "azure")
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        service.create_table("known")
    with table_client(server, "known") as client:
        for n in range(10):
            client.create_entity({"PartitionKey": "p", "RowKey": f"r{n}", "n": n})
        for n in range(3):
            client.get_entity("p", f"r{n}")
        found_rows = list(client.query_entities("PartitionKey eq 'p' and n ge 8"))
    assert len(found_rows) == 2  # scanned 10 to return 2

    found = prometheus(server)
    p = {"table": "known", "partition": "p"}
    assert metric_sum(found, "tabulae_entities_written_total", **p) == 10
    assert metric_sum(found, "tabulae_queries_total", **p, **{"class": "point"}) == 3
    table = {"table": "known"}
    assert metric_sum(found, "tabulae_entities_written_total", **table) == 10
    assert metric_sum(found, "tabulae_entities_read_total", **table) == 5  # 3 by key + 2 returned
    assert metric_sum(found, "tabulae_entities_scanned_total", **table) == 13  # 3 by key + 10 scanned
    assert metric_sum(found, "tabulae_queries_total", **table, **{"class": "row-range"}) == 1
    assert metric_sum(found, "tabulae_queries_total", **table) == 4
    assert metric_sum(found, "tabulae_throttled_total", **table) == 0
    assert {labels.get("account") for name, labels, _v in found if labels.get("table") == "known"} == {
        "devstoreaccount1"
    }

    document = snapshot(server)
    entry = table_entry(document, "known")
    assert (entry["written"], entry["read"], entry["scanned"], entry["throttled"]) == (10, 5, 13, 0)
    assert entry["queries"] == {
        "point": 3,
        "row-range": 1,
        "partition-scan": 0,
        "table-scan": 0,
        "index-scan": 0,
    }
    assert entry["density"] == pytest.approx(5 / 13)
    (partition,) = [p for p in document["partitions"] if p["table"].lower() == "known"]
    assert (partition["partition"], partition["written"]) == ("p", 10)
    assert document["targets"] == {"partition": 2000.0, "account": 20000.0}


def test_query_classes_are_counted(launch: Launcher) -> None:
    server = launch("--targets", "azure")
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        service.create_table("classes")
    with table_client(server, "classes") as client:
        for pk in "abc":
            client.submit_transaction(batch(pk, ["1", "2", "3"]))
        client.get_entity("a", "1")
        client.get_entity("b", "2")
        results = [
            list(client.query_entities("PartitionKey eq 'a' and RowKey eq '1'")),  # point: scans 1
            list(client.query_entities("PartitionKey eq 'b'")),  # row-range: 3
            list(client.query_entities("PartitionKey ge 'a' and PartitionKey lt 'c'")),  # partition-scan: 6
            list(client.list_entities()),  # table-scan: 9
            list(client.query_entities("missing eq 'x'")),  # table-scan: 9, returns none
        ]
    assert [len(r) for r in results] == [1, 3, 6, 9, 0]
    entry = table_entry(snapshot(server), "classes")
    assert entry["queries"] == {
        "point": 3,
        "row-range": 1,
        "partition-scan": 1,
        "table-scan": 2,
        "index-scan": 0,
    }
    assert entry["written"] == 9
    assert entry["scanned"] == 2 + 1 + 3 + 6 + 9 + 9
    assert entry["read"] == 2 + 1 + 3 + 6 + 9 + 0
    found = prometheus(server)
    for name, count in (("point", 3), ("row-range", 1), ("partition-scan", 1), ("table-scan", 2)):
        assert metric_sum(found, "tabulae_queries_total", table="classes", **{"class": name}) == count


def test_metrics_need_no_credentials_and_parse(launch: Launcher) -> None:
    server = launch()
    status, content_type, body = get_metrics(server)
    assert status == 200 and content_type.startswith("text/plain")
    names = {family.name for family in text_string_to_metric_families(body.decode("utf-8"))}
    assert {"tabulae_entities_written", "tabulae_queries", "tabulae_throttled"} <= names
    document = snapshot(server)
    assert {"accounts", "tables", "partitions", "warnings", "targets", "window_seconds"} <= set(document)


# --------------------------------------------------------------------------- tabulae stress


def test_stress_reports_a_throttled_partition(launch: Launcher) -> None:
    server = launch("--targets", "azure", "--partition-target", "50", "--account-target", "5000")
    report = run_stress(
        server.connection_string,
        table="stressed",
        scheme="single",
        entities=100,  # one batch: it leaves the partition in debt, so the drive is refused at once
        duration=1.0,
        concurrency=4,
        target=50,
    )
    assert report.verdict == VERDICT_AT
    assert report.throttled > 0
    if report.operations["range"]:
        assert report.scanned_exact  # x-tabulae-scanned was there to count with
    with TableServiceClient.from_connection_string(server.connection_string) as service:
        assert "stressed" not in [t.name for t in service.list_tables()]
