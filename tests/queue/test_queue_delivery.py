"""At-least-once delivery through real servers: visibility timeouts, stale receipts, competing
consumers on two worker processes and on two front-ends over one PostgreSQL database, a queue
being deleted, scalability targets and what ``/metrics`` says about queues.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, QueueSasPermissions, QueueServiceClient, generate_queue_sas
from prometheus_client.parser import text_string_to_metric_families

from tests.backends import database_backends
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess


def code_of(error: HttpResponseError) -> str | None:
    code = getattr(error, "error_code", None)
    return None if code is None else str(getattr(code, "value", code))


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """Servers a test starts itself (stopped afterwards)."""
    servers: list[ServerProcess] = []
    yield servers
    for server in servers:
        server.stop()


def start(servers: list[ServerProcess], data_dir: Path, *flags: str) -> ServerProcess:
    server = ServerProcess(data_dir, extra_args=list(flags)).start()
    servers.append(server)
    return server


# ----------------------------------------------------------------------------- visibility


def test_a_message_reappears_after_its_visibility_timeout(queue: Any) -> None:
    queue.send_message("work")
    first = queue.receive_message(visibility_timeout=1)
    assert first.dequeue_count == 1
    assert queue.receive_message() is None
    time.sleep(1.3)
    second = queue.receive_message(visibility_timeout=30)
    assert (second.id, second.dequeue_count) == (first.id, 2)
    # The first consumer's receipt went stale when the message was taken again.
    with pytest.raises(ResourceNotFoundError) as stale:
        queue.delete_message(first)
    assert code_of(stale.value) == "MessageNotFound"
    with pytest.raises(ResourceNotFoundError):
        queue.update_message(first, content="too late")
    queue.delete_message(second)
    assert queue.peek_messages() == []


def test_a_delayed_message_appears_when_due(queue: Any) -> None:
    queue.send_message("soon", visibility_timeout=1)
    assert queue.peek_messages() == []
    time.sleep(1.3)
    assert [m.content for m in queue.peek_messages()] == ["soon"]


def test_update_extends_and_shortens_invisibility(queue: Any) -> None:
    queue.send_message("lease")
    taken = queue.receive_message(visibility_timeout=1)
    extended = queue.update_message(taken, visibility_timeout=30)
    time.sleep(1.3)
    assert queue.receive_message() is None  # still held: the update extended it
    queue.update_message(taken.id, extended.pop_receipt, visibility_timeout=0)
    assert queue.receive_message().dequeue_count == 2


# ----------------------------------------------------------------------------- competing consumers


def consume(client: QueueClient, seen: list[str], problems: list[str], lock: threading.Lock) -> None:
    """Take and delete until the queue stays empty; every message must be ours alone."""
    empty_rounds = 0
    while empty_rounds < 3:
        batch = list(client.receive_messages(messages_per_page=8, max_messages=8, visibility_timeout=300))
        if not batch:
            empty_rounds += 1
            time.sleep(0.05)
            continue
        empty_rounds = 0
        with lock:
            seen.extend(m.id for m in batch)
        for message in batch:
            try:
                client.delete_message(message)
            except HttpResponseError as error:  # another consumer held it too and deleted it
                with lock:
                    problems.append(f"{message.id}: {code_of(error)}")


def run_consumers(connection_strings: list[str], queue: str, messages: int, consumers: int = 8) -> None:
    producer = QueueClient.from_connection_string(connection_strings[0], queue)
    producer.create_queue()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: producer.send_message(f"m{i}"), range(messages)))
    seen: list[str] = []
    problems: list[str] = []
    lock = threading.Lock()
    clients = [
        QueueClient.from_connection_string(connection_strings[i % len(connection_strings)], queue)
        for i in range(consumers)
    ]
    threads = [threading.Thread(target=consume, args=(c, seen, problems, lock)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert problems == []
    assert len(seen) == messages and len(set(seen)) == messages
    assert producer.get_queue_properties().approximate_message_count == 0


def test_consumers_on_two_worker_processes_never_share_a_message(
    started: list[ServerProcess], tmp_path: Path, queue_name: str
) -> None:
    server = start(started, tmp_path / "data", "--workers", "2")
    run_consumers([server.connection_string], queue_name, 400)


@pytest.mark.parametrize("backend", database_backends())
def test_consumers_on_two_frontends_over_postgresql_never_share_a_message(
    started: list[ServerProcess], tmp_path: Path, queue_name: str, backend: str
) -> None:
    database = fresh_store(backend)[1]
    first = start(started, tmp_path / "a", "--store", database, "--workers", "2")
    second = start(started, tmp_path / "b", "--store", database, "--workers", "1")
    run_consumers([first.connection_string, second.connection_string], queue_name, 400)


@pytest.mark.parametrize("backend", database_backends())
def test_a_message_taken_on_one_frontend_is_invisible_on_the_other(
    started: list[ServerProcess], tmp_path: Path, queue_name: str, backend: str
) -> None:
    database = fresh_store(backend)[1]
    first = start(started, tmp_path / "a", "--store", database, "--workers", "1")
    second = start(started, tmp_path / "b", "--store", database, "--workers", "1")
    a = QueueClient.from_connection_string(first.connection_string, queue_name)
    b = QueueClient.from_connection_string(second.connection_string, queue_name)
    a.create_queue()
    a.send_message("one")
    taken = b.receive_message(visibility_timeout=1)
    assert a.receive_message() is None and a.peek_messages() == []
    time.sleep(1.3)
    again = a.receive_message()
    assert (again.id, again.dequeue_count) == (taken.id, 2)
    with pytest.raises(ResourceNotFoundError):
        b.delete_message(taken)
    a.delete_message(again)


# ----------------------------------------------------------------------------- a queue being deleted


MESSAGE_BODY = b"<QueueMessage><MessageText>x</MessageText></QueueMessage>"


def test_a_large_queue_is_being_deleted_for_a_while(server: ServerProcess, queue_name: str) -> None:
    """Delete Queue removes up to 10,000 messages at once; a larger queue's name stays taken
    (409 QueueBeingDeleted) while the rest are collected in the background."""
    producer = QueueClient.from_connection_string(server.connection_string, queue_name)
    producer.create_queue()
    sas = generate_queue_sas(
        DEV_ACCOUNT, queue_name, DEV_KEY, permission=QueueSasPermissions(add=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip

    def send(count: int) -> None:
        """``count`` Put Messages on one kept connection (the SDK's client-side cost per message
        made the 10,001 messages most of this test's time)."""
        connection = http.client.HTTPConnection("127.0.0.1", server.queue_port, timeout=60)
        try:
            for _ in range(count):
                connection.request("POST", f"/{DEV_ACCOUNT}/{queue_name}/messages?{sas}", MESSAGE_BODY)
                response = connection.getresponse()
                response.read()
                assert response.status == 201, response.status
        finally:
            connection.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(send, [2_501, 2_500, 2_500, 2_500]))
    assert producer.get_queue_properties().approximate_message_count == 10_001
    producer.delete_queue()
    with pytest.raises(ResourceNotFoundError):
        producer.get_queue_properties()
    with pytest.raises(ResourceExistsError) as error:
        producer.create_queue()
    assert (error.value.status_code, code_of(error.value)) == (409, "QueueBeingDeleted")
    names = [
        q.name for q in QueueServiceClient.from_connection_string(server.connection_string).list_queues()
    ]
    assert queue_name not in names


# ----------------------------------------------------------------------------- targets and /metrics


def test_queue_target_and_the_account_target_shared_with_tables(
    started: list[ServerProcess], tmp_path: Path
) -> None:
    """One message per second to a queue, two operations per second to the account (tables and
    queues together): a queue's burst of one, then the account's burst of two, run out at once."""
    server = start(
        started,
        tmp_path / "data",
        "--in-memory", "--workers", "1", "--targets", "azure", "--queue-target", "1", "--account-target", "2",
    )  # fmt: skip
    service = QueueServiceClient.from_connection_string(server.connection_string, retry_total=0)
    first, second, third = (service.create_queue(name) for name in ("first", "second", "third"))
    first.send_message("x")
    with pytest.raises(HttpResponseError) as error:
        first.send_message("x")
    assert (error.value.status_code, code_of(error.value)) == (503, "ServerBusy")
    assert "over the account limit" not in str(error.value)  # the queue's own target
    second.send_message("x")  # the account's second operation
    table = TableServiceClient.from_connection_string(server.connection_string, retry_total=0).create_table(
        "spend"
    )
    with pytest.raises(HttpResponseError) as error:
        table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert error.value.status_code == 503 and "over the account limit" in str(error.value)
    with pytest.raises(HttpResponseError) as error:
        third.send_message("x")
    assert error.value.status_code == 503 and "over the account limit" in str(error.value)


def test_metrics_show_depth_rates_age_and_poison(started: list[ServerProcess], tmp_path: Path) -> None:
    server = start(started, tmp_path / "data", "--in-memory", "--workers", "1", "--poison-threshold", "2")
    queue = QueueClient.from_connection_string(server.connection_string, "watched")
    queue.create_queue()
    # One message fails three times: taken and given back at once, twice, then taken and held.
    queue.send_message("poison")
    for attempt in range(3):
        bad = queue.receive_message(visibility_timeout=60)
        if attempt < 2:
            queue.update_message(bad, visibility_timeout=0)
    assert bad.dequeue_count == 3
    for index in range(4):
        queue.send_message(f"m{index}")
    good = queue.receive_message(visibility_timeout=60)
    assert good.content == "m0"
    queue.delete_message(good)
    base = f"http://127.0.0.1:{server.port}"  # /metrics is on the Table port
    text = urllib.request.urlopen(f"{base}/metrics").read().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    labels = {"account": "devstoreaccount1", "queue": "watched"}

    def value(name: str, **extra: str) -> float:
        for sample in families[name].samples:
            if sample.labels == {**labels, **extra}:
                return float(sample.value)
        raise AssertionError(f"no {name} {extra} in {text}")

    assert value("tabulae_queue_depth") == 4
    assert value("tabulae_queue_poison_messages") == 1
    assert value("tabulae_queue_messages", op="put") == 5  # the parser drops the _total suffix
    assert value("tabulae_queue_messages", op="get") == 4
    assert value("tabulae_queue_messages", op="delete") == 1
    assert value("tabulae_queue_messages_per_second", op="put") == pytest.approx(0.5)
    assert value("tabulae_queue_oldest_visible_age_seconds") >= 0
    snapshot = json.loads(urllib.request.urlopen(f"{base}/metrics?format=json").read())
    [entry] = [q for q in snapshot["queues"] if q["queue"] == "watched"]
    assert (entry["depth"], entry["poison"], entry["messages"]["put"]) == (4, 1, 5)
    assert any(w["kind"] == "poison-messages" and w["queue"] == "watched" for w in snapshot["warnings"])
