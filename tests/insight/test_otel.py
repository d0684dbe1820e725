"""``tabulae serve --otel``: one OpenTelemetry span per request, read from the SDK's console
exporter in the server's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from tests.serverproc import DEV_ACCOUNT, ServerProcess, _kill_group


def _spans(output: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed, among the server's other lines."""
    decoder = json.JSONDecoder()
    spans, position = [], 0
    while (start := output.find("{", position)) != -1:
        try:
            value, position = decoder.raw_decode(output, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if isinstance(value, dict) and "attributes" in value:
            spans.append(value)
    return spans


def test_a_span_per_request_with_service_operation_account_status_and_storage_time(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", extra_args=["--workers", "1", "--otel"])
    command = [
        sys.executable, "-m", "tabulae", "serve", "--port", str(server.port),
        "--queue-port", str(server.queue_port), "--blob-port", str(server.blob_port),
        "--data-dir", str(server.data_dir), *server.extra_args,
    ]  # fmt: skip
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "tabulae-test"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with TableServiceClient.from_connection_string(server.connection_string) as tables:
                    tables.create_table("traced").create_entity({"PartitionKey": "p", "RowKey": "r"})
                break
            except Exception:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        with QueueServiceClient.from_connection_string(server.connection_string) as queues:
            queues.create_queue("traced").send_message("m")
        with BlobServiceClient.from_connection_string(server.connection_string) as blobs:
            blobs.create_container("traced").upload_blob("b", b"content")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        _kill_group(process.pid)
    spans = _spans(out)
    by_operation = {span["attributes"]["tabulae.operation"]: span for span in spans}
    assert {"CreateTable", "InsertEntity", "CreateQueue", "PutMessage", "CreateContainer", "PutBlob"} <= set(
        by_operation
    ), err
    insert = by_operation["InsertEntity"]
    assert insert["name"] == "Table InsertEntity"
    assert insert["kind"] == "SpanKind.SERVER"
    assert insert["resource"]["attributes"]["service.name"] == "tabulae-test"
    attributes = insert["attributes"]
    assert attributes["tabulae.service"] == "table"
    assert attributes["tabulae.account"] == DEV_ACCOUNT
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.response.status_code"] == 201
    assert attributes["tabulae.storage.ms"] > 0  # a durable write waits for the store
    assert by_operation["PutBlob"]["attributes"]["http.response.status_code"] == 201
    assert by_operation["PutMessage"]["attributes"]["tabulae.service"] == "queue"


def test_an_exporter_that_is_not_installed_is_named_before_serving(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--otel", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "zipkin"},
    )
    assert result.returncode != 0
    assert "OTEL_TRACES_EXPORTER='zipkin'" in result.stderr
