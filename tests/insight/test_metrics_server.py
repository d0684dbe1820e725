"""``/metrics`` over a whole server: every worker's counts, who may read them, hidden keys (issue 29).

With ``--workers 2`` the kernel spreads new connections over two processes that each count what
they serve; ``/metrics`` (any worker answering), the console's Insight page and ``tabulae top``'s
data source must all show the sum, and ``--targets`` must throttle at the server's rate, not a
worker's. Off loopback ``/metrics`` names customers' keys, so it needs an account key or the
metrics token; ``--metrics-keys hashed`` hides the keys and names behind a keyed hash.

Requests go over fresh connections so both workers serve some; the tests check from the
per-worker figures that both did rather than trusting the kernel.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient, TableTransactionError
from prometheus_client.parser import text_string_to_metric_families

from tabulae.tools.top import fetch_snapshot, metrics_headers, metrics_url, render_top
from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

Launcher = Callable[..., ServerProcess]
WRITES = 500
TOKEN = "s3cret-metrics-token"


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launcher]:
    servers: list[ServerProcess] = []

    def start(*flags: str) -> ServerProcess:
        server = ServerProcess(tmp_path / f"data{len(servers)}", extra_args=["--in-memory", *flags])
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.stop()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One GET on a fresh connection (so the kernel picks a worker anew)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def snapshot(server: ServerProcess) -> dict[str, Any]:
    status, _headers, body = get(server.port, "/metrics?format=json")
    assert status == 200, body
    document: dict[str, Any] = json.loads(body)
    return document


def write_over_fresh_connections(
    server: ServerProcess, table: str, writes: int, per_client: int = 10
) -> None:
    TableServiceClient.from_connection_string(server.connection_string).create_table(table)
    for start in range(0, writes, per_client):
        with TableServiceClient.from_connection_string(server.connection_string) as service:
            client = service.get_table_client(table)
            for index in range(start, min(start + per_client, writes)):
                client.upsert_entity({"PartitionKey": f"customer-{index % 7}", "RowKey": str(index)})


def written(document: dict[str, Any], table: str) -> int:
    return sum(t["written"] for t in document["tables"] if t["table"] == table)


def test_every_worker_counts_in_every_view(launch: Launcher) -> None:
    server = launch("--workers", "2")
    write_over_fresh_connections(server, "orders", WRITES)
    for _ in range(8):  # any worker may answer: each answer is the whole server's
        document = snapshot(server)
        assert written(document, "orders") == WRITES
        assert document["frontend"]["workers"] == 2 and document["frontend"]["reporting"] == 2
        processes = document["frontend"]["processes"]
        assert len(processes) == 2 and all(p["requests"] > 0 for p in processes), processes  # both served
        assert sum(p["requests"] for p in processes) >= WRITES
        partitions = {p["partition"]: p["written"] for p in document["partitions"] if p["table"] == "orders"}
        assert sum(partitions.values()) == WRITES and len(partitions) == 7
    status, _headers, body = get(server.port, "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    total = sum(s.value for s in families["tabulae_entities_written"].samples
                if s.name.endswith("_total") and s.labels["table"] == "orders")  # fmt: skip
    assert total == WRITES
    workers = [s for s in families["tabulae_frontend_process_requests"].samples if s.name.endswith("_total")]
    assert len(workers) == 2 and all(s.value > 0 for s in workers)
    # tabulae top reads the same document (signed, as it would be off loopback).
    url = metrics_url(server.endpoint)
    top_document = fetch_snapshot(
        url, headers=metrics_headers(url, connection_string=server.connection_string)
    )
    assert written(top_document, "orders") == WRITES
    assert "orders" in render_top(top_document, 120)
    # The console's Insight page draws the same sum.
    console = ConsoleClient(server.port)
    console.sign_in(DEV_ACCOUNT, DEV_KEY)
    for _ in range(4):
        page = console.get("/insight")
        assert page.status == 200
        assert f"{WRITES:,} written" in page.text


def test_targets_hold_for_the_whole_server(launch: Launcher) -> None:
    """A partition target of 20/s is the server's. A batch of 100 passes on a full bucket (of 20)
    and leaves a debt of 80, so the next batch of 100 waits five seconds whichever worker it
    reaches; with a bucket per worker the first batch each worker sees would pass."""
    server = launch("--workers", "2", "--targets", "azure", "--partition-target", "20")
    TableServiceClient.from_connection_string(server.connection_string).create_table("hot")
    outcomes = []
    started = time.monotonic()
    # Eight batches at least, each on a connection of its own, and more (a refused one returns at
    # once) until both workers have taken one: which worker accepts a connection is the kernel's
    # choice, and once in a while eight in a row went to the same one.
    for attempt in range(60):
        with TableServiceClient.from_connection_string(server.connection_string, retry_total=0) as service:
            rows = [("upsert", {"PartitionKey": "p", "RowKey": f"{attempt}-{i}"}) for i in range(100)]
            try:
                service.get_table_client("hot").submit_transaction(rows)  # type: ignore[arg-type]
                outcomes.append("ok")
            except (TableTransactionError, HttpResponseError) as error:
                assert error.status_code == 503, error
                outcomes.append("busy")
        if attempt >= 7 and all(p["requests"] > 0 for p in snapshot(server)["frontend"]["processes"]):
            break
    elapsed = time.monotonic() - started
    document = snapshot(server)
    # Both workers took batches (only batches are counted as the account's requests).
    assert [p["requests"] > 0 for p in document["frontend"]["processes"]] == [True, True], document
    admitted = outcomes.count("ok")
    assert outcomes[0] == "ok" and admitted <= 1 + int(elapsed / 5), (outcomes, elapsed)
    table = next(t for t in document["tables"] if t["table"] == "hot")
    assert table["written"] == 100 * admitted
    assert table["throttled"] == outcomes.count("busy")


def test_metrics_off_loopback_need_the_key_or_the_token(launch: Launcher) -> None:
    server = launch("--workers", "1", "--host", "0.0.0.0", "--metrics-token", TOKEN)
    status, headers, body = get(server.port, "/metrics")
    assert status == 403
    assert headers["x-ms-error-code"] == "AuthenticationFailed"
    error = json.loads(body)["odata.error"]
    assert error["code"] == "AuthenticationFailed" and "RequestId:" in error["message"]["value"]
    assert get(server.port, "/metrics", {"Authorization": "Bearer wrong-token"})[0] == 403
    assert get(server.port, "/metrics", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    url = metrics_url(server.endpoint)
    signed = metrics_headers(url, connection_string=server.connection_string)
    status, _headers, body = get(server.port, "/metrics?format=json", signed)
    assert status == 200 and "tables" in json.loads(body)
    forged = metrics_headers(
        url,
        connection_string=server.connection_string.replace(DEV_KEY, "A" * 86 + "=="),
    )
    assert get(server.port, "/metrics?format=json", forged)[0] == 403
    # One port: on the Queue and Blob ports /metrics is nothing of ours.
    for port in (server.queue_port, server.blob_port):
        assert get(port, "/metrics", {"Authorization": f"Bearer {TOKEN}"})[0] != 200


def test_metrics_on_loopback_stay_open(launch: Launcher) -> None:
    server = launch("--workers", "1")
    assert get(server.port, "/metrics")[0] == 200


@pytest.mark.parametrize(
    "host",
    ["attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io", "[::1].attacker.example", ""],
)
def test_metrics_on_loopback_are_not_open_to_other_host_names(launch: Launcher, host: str) -> None:
    """DNS rebinding: a web page whose own name its author points at 127.0.0.1 reaches a server
    that listens on loopback only, and may read what it answers (one origin), but its requests
    still name that page's host. Open access is for this machine's clients, which name it by a
    loopback name; any other name needs the key or the token, as off loopback."""
    server = launch("--workers", "1", "--metrics-token", TOKEN)
    table = TableServiceClient.from_connection_string(server.connection_string).create_table("PrivateNames")
    table.create_entity({"PartitionKey": "customer-alice@example.com", "RowKey": "1"})
    foreign = {"Host": f"{host}:{server.port}" if host else ""}
    for path in ("/metrics", "/metrics?format=json"):
        status, headers, body = get(server.port, path, foreign)
        assert status == 403 and headers["x-ms-error-code"] == "AuthenticationFailed", (path, status)
        assert b"alice" not in body and b"PrivateNames" not in body
        status, _headers, body = get(server.port, path, {**foreign, "Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and b"customer-alice@example.com" in body
    for name in (
        "localhost",
        "LOCALHOST.",
        "devstoreaccount1.table.localhost",
        "127.0.0.1",
        "127.8.9.10",
        "[::1]",
    ):
        status, _headers, body = get(server.port, "/metrics", {"Host": f"{name}:{server.port}"})
        assert status == 200 and b"customer-alice@example.com" in body, name


def test_hashed_keys_hide_partition_keys_and_names(launch: Launcher) -> None:
    server = launch("--workers", "2", "--metrics-keys", "hashed")
    write_over_fresh_connections(server, "CustomerOrders", 60)
    service = TableServiceClient.from_connection_string(server.connection_string)
    for name in range(3):  # the console and clients see their data as it is
        assert service.get_table_client("CustomerOrders").get_entity(f"customer-{name}", str(name))
    text = get(server.port, "/metrics")[2].decode()
    document = snapshot(server)
    for exposed in (text, json.dumps(document)):
        assert "customer-" not in exposed and "CustomerOrders" not in exposed.replace("customerorders", "")
        assert "customerorders" not in exposed.lower()
    hashes = {p["partition"] for p in document["partitions"]}
    assert len(hashes) == 7 and all(re.fullmatch(r"#[0-9a-f]{12}", h) for h in hashes), hashes
    assert sum(p["written"] for p in document["partitions"]) == 60
    assert {p["partition"] for p in snapshot(server)["partitions"]} == hashes  # stable
    assert all(re.fullmatch(r"#[0-9a-f]{12}", t["table"]) for t in document["tables"])


def test_counts_of_a_worker_that_died_stay_in_the_sums(launch: Launcher) -> None:
    """Counters never go back: a worker killed outright leaves its last published counts (every
    /metrics makes the workers publish), and the worker started in its place counts on."""
    server = launch("--workers", "2")
    write_over_fresh_connections(server, "orders", 100)
    document = snapshot(server)
    assert written(document, "orders") == 100
    victim = document["frontend"]["processes"][0]["pid"]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until uvicorn has started a replacement that answers
        pids = [p["pid"] for p in snapshot(server)["frontend"]["processes"]]
        if len(pids) == 3:
            break
        time.sleep(0.5)
    assert victim in pids and len(pids) == 3, pids
    write_over_fresh_connections(server, "more", 50)
    for _ in range(4):
        document = snapshot(server)
        assert written(document, "orders") == 100 and written(document, "more") == 50
