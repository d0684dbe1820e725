"""``tabulae migrate azurite`` on workspaces the peer's real npm package writes: every entity type,
thousands of entities and hundreds of messages (10,000 and 1,000, and a 64 MiB blob, with
TABULAE_TEST_FULL_MIGRATION=1), block and append blobs with properties, metadata and block
lists, compared item by item after an interrupted and resumed migration."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import EdmType, EntityProperty, TableAccessPolicy, TableServiceClient
from azure.storage.blob import (
    AccessPolicy,
    BlobAnalyticsLogging,
    BlobBlock,
    BlobServiceClient,
    ContentSettings,
    CorsRule,
    Metrics,
    RetentionPolicy,
)
from azure.storage.queue import AccessPolicy as QueueAccessPolicy
from azure.storage.queue import CorsRule as QueueCorsRule
from azure.storage.queue import QueueServiceClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess, free_port

CACHE = Path(os.environ.get("TABULAE_BENCH_CACHE", Path.home() / ".cache" / "tabulae-bench")) / "azurite"
# The sizes (10,000 entities, 1,000 messages, a 64 MiB blob) with TABULAE_TEST_FULL_MIGRATION=1;
# by default a quarter of them and a 16 MiB blob, which keeps the test near a minute.
FULL = os.environ.get("TABULAE_TEST_FULL_MIGRATION") == "1"
ENTITIES = 10_000 if FULL else 2_500
MESSAGES = 1_000 if FULL else 250
HIDDEN = 10  # messages sent with an hour's visibility timeout
BIG = (64 if FULL else 16) * 1024 * 1024


def _azurite() -> Path:
    """Azurite's npm package, installed once into the benchmarks' cache (as benchmarks/ does)."""
    program = CACHE / "node_modules" / ".bin" / "azurite"
    if program.exists():
        return program
    assert shutil.which("npm"), "npm is needed to install Azurite for this test (apt-get install npm)"
    CACHE.mkdir(parents=True, exist_ok=True)
    if not (CACHE / "package.json").exists():
        (CACHE / "package.json").write_text('{"name": "tabulae-bench-azurite", "private": true}\n')
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "azurite"],
        cwd=CACHE,
        check=True,
        capture_output=True,
        timeout=900,
    )
    return program


@contextlib.contextmanager
def _running_azurite(location: Path) -> Iterator[str]:
    ports = {"blob": free_port(), "queue": free_port(), "table": free_port()}
    command = [
        str(_azurite()),
        "--silent",
        "--location",
        str(location),
        "--skipApiVersionCheck",
        "--disableTelemetry",
    ]
    for service, port in ports.items():
        command += [f"--{service}Port", str(port)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        for port in ports.values():
            while True:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    assert time.monotonic() < deadline, "Azurite did not start"
                    time.sleep(0.1)
        yield (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{ports['blob']}/{DEV_ACCOUNT};"
            f"QueueEndpoint=http://127.0.0.1:{ports['queue']}/{DEV_ACCOUNT};"
            f"TableEndpoint=http://127.0.0.1:{ports['table']}/{DEV_ACCOUNT};"
        )
    finally:
        process.send_signal(signal.SIGINT)  # Azurite saves its databases as it closes
        try:
            process.wait(60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if process.stderr:
                process.stderr.close()


# ------------------------------------------------------------------------------ the workload


def _entities() -> list[dict[str, Any]]:
    every_type = {
        "PartitionKey": "types",
        "RowKey": "all",
        "String": "text ' \" < & ünïcödé 😀",
        "Int32": -2147483648,
        "Int64": EntityProperty(2**62 + 1, EdmType.INT64),
        "Double": 2.5,
        "WholeDouble": EntityProperty(3.0, EdmType.DOUBLE),
        "NaN": float("nan"),
        "Inf": float("inf"),
        "NegInf": float("-inf"),
        "Bool": False,
        "DateTime": datetime(2021, 2, 3, 4, 5, 6, 789012, tzinfo=UTC),
        "Guid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "Binary": bytes(range(256)),
        "Empty": "",
    }
    rows = [every_type]
    for i in range(ENTITIES - 1):
        rows.append(
            {
                "PartitionKey": f"p{i % 37:02d}",
                "RowKey": f"r{i:06d}'ü",
                "N": i,
                "Big": EntityProperty(i * 1_000_000_007, EdmType.INT64),
                "F": i / 7,
                "When": datetime(2020, 1, 1, tzinfo=UTC).replace(second=i % 60),
                "Id": uuid.UUID(int=i),
                "Bytes": i.to_bytes(4, "big"),
                "Flag": i % 2 == 0,
            }
        )
    return rows


def _norm(value: Any) -> Any:
    """A comparable form of a property as the SDK writes or reads it."""
    if isinstance(value, EntityProperty):
        return _norm(value.value)
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _texts() -> list[str]:
    return [
        f"message {i} <&> ✓" if i % 3 else base64.b64encode(os.urandom(48)).decode() for i in range(MESSAGES)
    ]


def _blobs() -> dict[str, bytes]:
    return {
        "empty": b"",
        "one": b"x",
        "small.json": b'{"a": 1}' * 100,
        "four-mib-and-one": os.urandom(4 * 1024 * 1024 + 1),
        "big": os.urandom(BIG),
    }


SETTINGS = {
    "content_type": "application/x-test",
    "content_encoding": "identity",
    "content_language": "de-CH",
    "content_disposition": "attachment; filename=x",
    "cache_control": "max-age=60",
}


START, EXPIRY = datetime(2026, 1, 1, tzinfo=UTC), datetime(2036, 1, 1, tzinfo=UTC)
# The blob and queue SDKs hand a policy's times back as the wire's text.
WIRE_START, WIRE_EXPIRY = "2026-01-01T00:00:00.0000000Z", "2036-01-01T00:00:00.0000000Z"
BLOB_CORS = CorsRule(
    ["http://a.example", "http://b.example"],
    ["GET", "PUT"],
    allowed_headers=["x-ms-meta-*"],
    exposed_headers=["x-ms-request-id"],
    max_age_in_seconds=60,
)


def _write_workload(connection_string: str) -> dict[str, Any]:
    expected: dict[str, Any] = {}
    with TableServiceClient.from_connection_string(connection_string) as tables:
        table = tables.create_table("migrated")
        table.set_table_access_policy(
            {"readers": TableAccessPolicy(permission="r", start=START, expiry=EXPIRY)}
        )
        rows = _entities()
        partitions: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            partitions.setdefault(row["PartitionKey"], []).append(row)
        for members in partitions.values():
            for start in range(0, len(members), 100):
                table.submit_transaction([("upsert", row) for row in members[start : start + 100]])
        tables.create_table("emptytable")
        expected["entities"] = {
            (row["PartitionKey"], row["RowKey"]): {k: _norm(v) for k, v in row.items()} for row in rows
        }
    with QueueServiceClient.from_connection_string(connection_string) as queues:
        queue = queues.create_queue("orders", metadata={"purpose": "migration", "n": "1"})
        queue.set_queue_access_policy({"senders": QueueAccessPolicy("a", expiry=EXPIRY, start=START)})
        queues.set_service_properties(cors=[QueueCorsRule(["*"], ["GET", "POST"], max_age_in_seconds=5)])
        texts = _texts()
        for i, text in enumerate(texts):
            queue.send_message(
                text, visibility_timeout=3600 if i < HIDDEN else 0, time_to_live=-1 if i % 2 else None
            )
        queues.create_queue("idle")
        expected["visible"] = Counter(texts[HIDDEN:])
        expected["forever"] = {text for i, text in enumerate(texts) if i % 2}
    with BlobServiceClient.from_connection_string(connection_string) as blobs:
        container = blobs.create_container("data", metadata={"owner": "tests"}, public_access="blob")
        container.set_container_access_policy(
            {"listers": AccessPolicy("rl", expiry=EXPIRY, start=START)}, public_access="blob"
        )
        blobs.set_service_properties(
            analytics_logging=BlobAnalyticsLogging(read=True, retention_policy=RetentionPolicy(True, 3)),
            hour_metrics=Metrics(enabled=True, include_apis=True, retention_policy=RetentionPolicy(True, 5)),
            cors=[BLOB_CORS],
            target_version="2020-10-02",
            delete_retention_policy=RetentionPolicy(True, 7),
        )
        contents = _blobs()
        for name, data in contents.items():
            container.upload_blob(
                name,
                data,
                metadata={"name": name.replace(".", "_")},
                content_settings=ContentSettings(**SETTINGS),
            )
        staged = container.get_blob_client("blocks")
        for block_id, data in (("block-a", b"A" * 1000), ("block-b", b"B" * 2000), ("block-c", b"C" * 10)):
            staged.stage_block(block_id, data)
        staged.commit_block_list(
            [BlobBlock("block-a"), BlobBlock("block-c"), BlobBlock("block-a")], metadata={"k": "v"}
        )
        staged.stage_block("block-later", b"L" * 5)  # stays uncommitted
        contents["blocks"] = b"A" * 1000 + b"C" * 10 + b"A" * 1000
        appended = container.get_blob_client("log")
        appended.create_append_blob(metadata={"kind": "append"})
        for part in (b"first\n", b"second\n", b"third\n"):
            appended.append_block(part)
        contents["log"] = b"first\nsecond\nthird\n"
        disk = container.get_blob_client("disk.vhd")  # a page blob: two written stretches
        disk.create_page_blob(64 * 1024, metadata={"kind": "page"}, sequence_number=5)
        disk.upload_page(b"P" * 4096, offset=8192, length=4096)
        disk.upload_page(b"Q" * 512, offset=63 * 1024 + 512, length=512)
        contents["disk.vhd"] = bytes(8192) + b"P" * 4096 + bytes(64 * 1024 - 12288 - 512) + b"Q" * 512
        blobs.create_container("private")
        expected["blobs"] = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
    return expected


# ------------------------------------------------------------------------------------ checks


def _check(server: ServerProcess, expected: dict[str, Any]) -> None:
    text = server.connection_string
    with TableServiceClient.from_connection_string(text) as tables:
        assert sorted(t.name for t in tables.list_tables()) == ["emptytable", "migrated"]
        found = {
            (e["PartitionKey"], e["RowKey"]): {k: _norm(v) for k, v in e.items()}
            for e in tables.get_table_client("migrated").list_entities(results_per_page=1000)
        }
        assert found.keys() == expected["entities"].keys()
        for key, want in expected["entities"].items():
            assert found[key] == want, key
        assert isinstance(
            tables.get_table_client("migrated").get_entity("types", "all")["Int64"], EntityProperty
        )
        policies = tables.get_table_client("migrated").get_table_access_policy()
        assert sorted(policies) == ["readers"]
        readers = policies["readers"]
        assert readers is not None
        assert (readers.permission, readers.start, readers.expiry) == ("r", START, EXPIRY)
    with QueueServiceClient.from_connection_string(text) as queues:
        assert sorted(q.name for q in queues.list_queues()) == ["idle", "orders"]
        orders = queues.get_queue_client("orders")
        properties = orders.get_queue_properties()
        assert properties.metadata == {"purpose": "migration", "n": "1"}
        senders = orders.get_queue_access_policy()["senders"]
        assert senders.permission == "a"
        assert (senders.start, senders.expiry) == (
            "2026-01-01T00:00:00.0000000Z",
            "2036-01-01T00:00:00.0000000Z",
        )
        cors = queues.get_service_properties()["cors"]
        assert [(r.allowed_origins, r.allowed_methods, r.max_age_in_seconds) for r in cors] == [
            ("*", "GET,POST", 5)
        ]
        assert properties.approximate_message_count == MESSAGES
        received: Counter[str] = Counter()
        for _ in range(MESSAGES):
            batch = list(
                orders.receive_messages(messages_per_page=32, visibility_timeout=600, max_messages=32)
            )
            if not batch:
                break
            received.update(message.content for message in batch)
            for message in batch:  # the time to live moved with the message: "never" stays never
                assert (message.expires_on.year == 9999) == (message.content in expected["forever"])
        assert received == expected["visible"]  # the hidden ones stay hidden
    with BlobServiceClient.from_connection_string(text) as blobs:
        assert sorted(c.name for c in blobs.list_containers()) == ["data", "private"]
        data = blobs.get_container_client("data")
        assert data.get_container_properties().metadata == {"owner": "tests"}
        acl = data.get_container_access_policy()
        assert acl["public_access"] == "blob"
        [listers] = acl["signed_identifiers"]
        assert listers.id == "listers"
        policy = listers.access_policy
        assert (policy.permission, policy.start, policy.expiry) == ("rl", WIRE_START, WIRE_EXPIRY)
        service = blobs.get_service_properties()
        assert service["analytics_logging"].read and service["analytics_logging"].retention_policy.days == 3
        assert service["hour_metrics"].enabled and service["hour_metrics"].retention_policy.days == 5
        assert [
            (r.allowed_origins, r.allowed_methods, r.allowed_headers, r.exposed_headers)
            for r in service["cors"]
        ] == [("http://a.example,http://b.example", "GET,PUT", "x-ms-meta-*", "x-ms-request-id")]
        assert service["target_version"] == "2020-10-02"
        assert service["delete_retention_policy"].enabled and service["delete_retention_policy"].days == 7
        names = sorted(b.name for b in data.list_blobs())
        assert names == sorted(expected["blobs"])
        for name, digest in expected["blobs"].items():
            client = data.get_blob_client(name)
            downloaded = hashlib.sha256()
            for chunk in client.download_blob().chunks():
                downloaded.update(chunk)
            assert downloaded.hexdigest() == digest, name
            properties = client.get_blob_properties()
            if name in _blobs():
                assert properties.metadata == {"name": name.replace(".", "_")}
                for field, value in SETTINGS.items():
                    assert getattr(properties.content_settings, field) == value, (name, field)
        blocks = data.get_blob_client("blocks")
        committed, uncommitted = blocks.get_block_list("all")
        assert [(b.id, b.size) for b in committed] == [("block-a", 1000), ("block-c", 10), ("block-a", 1000)]
        assert [(b.id, b.size) for b in uncommitted] == [("block-later", 5)]
        assert blocks.get_blob_properties().metadata == {"k": "v"}
        log = data.get_blob_client("log").get_blob_properties()
        assert (log.blob_type, log.metadata) == ("AppendBlob", {"kind": "append"})
        disk = data.get_blob_client("disk.vhd")
        properties = disk.get_blob_properties()
        assert (properties.blob_type, properties.metadata) == ("PageBlob", {"kind": "page"})
        assert properties.page_blob_sequence_number == 5
        assert [(r.start, r.end) for r in disk.list_page_ranges()] == [
            (8192, 12287),
            (64 * 1024 - 512, 64 * 1024 - 1),
        ]


def _migrate(location: Path, target: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tabulae",
            "migrate",
            "azurite",
            "--location",
            str(location),
            "--data-dir",
            str(target),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.timeout(900)
def test_a_workspace_moves_over_item_by_item_after_an_interruption(tmp_path: Path) -> None:
    location, target = tmp_path / "workspace", tmp_path / "tabulae-data"
    location.mkdir()
    with _running_azurite(location) as connection_string:
        expected = _write_workload(connection_string)
    progress = location / "tabulae-migrate.progress"

    # Interrupted once entities are on their way (SIGKILL: no chance to tidy up) ...
    first = _migrate(location, target)
    deadline = time.monotonic() + 300
    recorded: dict[str, int] = {}
    while time.monotonic() < deadline and first.poll() is None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            recorded = json.loads(progress.read_bytes())["position"]
            if recorded.get(f"table/{DEV_ACCOUNT}/migrated", 0) > 1:
                break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(first.pid, signal.SIGKILL)
    first.communicate()
    assert not any(key.startswith("queue/") for key in recorded), "interrupted too late to test resuming"

    # ... and run again: it continues from the recorded progress and finishes.
    second = _migrate(location, target)
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, err
    report = dict(
        line.split(None, 1) for line in out.splitlines() if line and line[0].isalpha() and "  " in line
    )
    assert "from an earlier run" in report["entities"]
    assert report["messages"].strip() == f"{MESSAGES:,}"
    assert "not moved: 1 blob snapshots" not in out  # nothing of the kind in this workspace
    assert "+2 from an earlier run" in report["services"]  # set before the interruption
    assert report["policies"].strip() == "2"  # the queue's and the container's; the table's came first

    # Once done, a further run writes nothing.
    again = _migrate(location, target)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert f"+{ENTITIES:,} from an earlier run" in out and f"+{MESSAGES:,} from an earlier run" in out

    server = ServerProcess(target, extra_args=["--workers", "1"]).start()
    try:
        _check(server, expected)
    finally:
        server.stop()


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tabulae",
            "migrate",
            "azurite",
            "--location",
            str(empty),
            "--data-dir",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "no Azurite database files" in result.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "__azurite_db_table__.json").write_text(
        json.dumps(
            {
                "collections": [
                    {"name": "$TABLES_COLLECTION$", "data": [{"account": "elsewhere", "table": "t1"}]}
                ]
            }
        )
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tabulae",
            "migrate",
            "azurite",
            "--location",
            str(other),
            "--data-dir",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "account 'elsewhere'" in result.stderr and "AZURITE_ACCOUNTS" in result.stderr
