"""Operations (issue #7): an online backup taken while writes continue is consistent and restores,
and the access log is one JSON line per request with no SAS signature in it.

Backup. A two-worker server holds about 8 MB (more than one 1024-page step of SQLite's online
backup, so the copy takes several steps while the store changes under it). Four writers keep
inserting rows of their own, one request at a time, every fifth request a batch of three rows.
``tabulae backup DEST --data-dir D`` runs while they write. Then ``tabulae serve --data-dir
DEST`` serves the copy (the restore), and:

* every entity acknowledged before the backup started is there, with its ETag and properties;
* the copy is a consistent snapshot: each writer's rows form a prefix of its sequence (a writer
  only sends a request after the previous one was acknowledged, so a gap would mean the copy
  mixes moments), and each batch is there entirely or not at all; nothing unknown is there;
* the copy passes ``PRAGMA integrity_check`` and takes writes;
* a second backup into the same directory is refused and leaves the copy intact.

Access log. With ``--access-log`` (stderr to a file), requests signed with Shared Key and with a
SAS (raw and through the SDK, good and bad signatures) each produce exactly one JSON line with
method, path, status, ms and request_id; the path has no query string, and the SAS ``sig`` value
appears nowhere in the log, neither raw nor percent-encoded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, TableSasPermissions, generate_table_sas

from tests.rawhttp import RawClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY
from tests.system.test_reliability_support import (
    CONNECTION_ERRORS,
    ROOT,
    BatchOp,
    IsolatedServer,
    entity_map,
    integrity_check,
    parse_batch_response,
    query_all,
    send_batch,
    wait_for_workers,
)

TABLE = "backedup"
WRITERS = 4


class Writer(threading.Thread):
    """Inserts its own rows in sequence; every fifth step is a batch of three rows."""

    def __init__(self, port: int, index: int) -> None:
        super().__init__(name=f"writer-{index}", daemon=True)
        self.client = RawClient(port)
        self.partition = f"w{index}"
        self.stop = threading.Event()
        self.steps: list[list[str]] = []  # row keys written by each acknowledged step, in order
        self.acked: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self.problems: list[str] = []
        self.sent_step: list[str] | None = None

    def run(self) -> None:
        step = 0
        while not self.stop.is_set():
            if step % 5 == 4:
                rows = [f"{step:06d}-{j}" for j in range(3)]
                entities = [{"PartitionKey": self.partition, "RowKey": rk, "step": step} for rk in rows]
                self.sent_step = rows
                try:
                    response = send_batch(self.client, [BatchOp("POST", TABLE, {}, e) for e in entities])
                except CONNECTION_ERRORS as exc:
                    self.problems.append(f"{self.partition} step {step}: {exc!r}")
                    return
                parts = parse_batch_response(response) if response.status == 202 else []
                if [p.status for p in parts] != [201, 201, 201]:
                    self.problems.append(f"{self.partition} step {step}: {response!r}")
                    return
                for rk, part in zip(rows, parts, strict=True):
                    self.acked[(self.partition, rk)] = (part.headers["etag"], {"step": step})
            else:
                rows = [f"{step:06d}"]
                self.sent_step = rows
                try:
                    response = self.client.insert(
                        TABLE, {"PartitionKey": self.partition, "RowKey": rows[0], "step": step}
                    )
                except CONNECTION_ERRORS as exc:
                    self.problems.append(f"{self.partition} step {step}: {exc!r}")
                    return
                if response.status != 201:
                    self.problems.append(f"{self.partition} step {step}: {response!r}")
                    return
                self.acked[(self.partition, rows[0])] = (response.header("etag") or "", {"step": step})
            self.steps.append(rows)
            self.sent_step = None
            step += 1


def _tabulae(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabulae", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(240)
def test_online_backup_while_writing_is_consistent_and_restores(tmp_path: Path) -> None:
    data, dest = tmp_path / "data", tmp_path / "backup"
    server = IsolatedServer(data, ["--workers", "2"], log_path=tmp_path / "server.log").start()
    restored: IsolatedServer | None = None
    writers = [Writer(server.port, index) for index in range(WRITERS)]
    try:
        wait_for_workers(server, 2)
        raw = server.raw()
        assert raw.create_table(TABLE).status == 201
        bulk: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for chunk in range(20):  # 2000 rows of 4 KB: about 8 MB, several backup steps
            entities = [
                {"PartitionKey": "bulk", "RowKey": f"{chunk:02d}-{i:03d}", "pad": "b" * 4000}
                for i in range(100)
            ]
            response = send_batch(raw, [BatchOp("POST", TABLE, {}, e) for e in entities])
            parts = parse_batch_response(response)
            assert [p.status for p in parts] == [201] * 100, response
            for entity, part in zip(entities, parts, strict=True):
                bulk[("bulk", entity["RowKey"])] = (part.headers["etag"], {"pad": entity["pad"]})

        for writer in writers:
            writer.start()
        time.sleep(0.5)
        acked_before = {**bulk}
        for writer in writers:
            acked_before.update(dict(writer.acked))
        backup = _tabulae("backup", str(dest), "--data-dir", str(data))
        for writer in writers:
            writer.stop.set()
        for writer in writers:
            writer.join(30)
        assert backup.returncode == 0, f"backup failed: {backup.stdout}{backup.stderr}"
        assert "backed up" in backup.stdout
        for writer in writers:
            assert writer.problems == [], writer.problems
        written_during = sum(len(w.acked) for w in writers) - (len(acked_before) - len(bulk))
        assert written_during > 0, "no write happened while the backup ran: the test tested nothing"
        assert integrity_check(dest / "tabulae.db") == "ok"

        # The restore: serve the copy.
        restored = IsolatedServer(dest, ["--workers", "1"], log_path=tmp_path / "restored.log").start()
        found = entity_map(query_all(restored.raw(), TABLE))
        missing = {key: value for key, value in acked_before.items() if found.get(key) != value}
        assert missing == {}, f"{len(missing)} entities acknowledged before the backup are missing or changed"
        for writer in writers:
            steps = [*writer.steps, *([writer.sent_step] if writer.sent_step else [])]
            counts = [sum((writer.partition, rk) in found for rk in rows) for rows in steps]
            for rows, count in zip(steps, counts, strict=True):
                assert count in (0, len(rows)), f"{writer.partition}: half a batch in the backup: {rows}"
            present = [count > 0 for count in counts]
            cut = present.index(False) if False in present else len(present)
            assert not any(present[cut:]), (
                f"{writer.partition}: the backup has a gap (not one moment's state)"
            )
            for key in (k for k in found if k[0] == writer.partition and k in writer.acked):
                assert found[key] == writer.acked[key], key
        known = (
            set(bulk)
            | {k for w in writers for k in w.acked}
            | {(w.partition, rk) for w in writers for rk in (w.sent_step or [])}
        )
        assert set(found) <= known, f"unknown entities in the backup: {sorted(set(found) - known)[:5]}"
        response = restored.raw().insert(TABLE, {"PartitionKey": "after", "RowKey": "restore"})
        assert response.status == 201, response
        restored.stop()
        restored = None
        assert integrity_check(dest / "tabulae.db") == "ok"

        again = _tabulae("backup", str(dest), "--data-dir", str(data))
        assert again.returncode != 0 and "exists" in (again.stdout + again.stderr), again
        assert integrity_check(dest / "tabulae.db") == "ok"
    finally:
        for writer in writers:
            writer.stop.set()
        if restored is not None:
            restored.kill()
        server.stop()


# --------------------------------------------------------------------------------------------
# Access log
# --------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_access_log_has_one_json_line_per_request_and_no_sas_signature(tmp_path: Path) -> None:
    log_path = tmp_path / "server.log"
    server = IsolatedServer(tmp_path / "data", ["--workers", "1", "--access-log"], log_path=log_path).start()
    seen: list[tuple[str, str, int]] = []  # (request id, method, status) of every answer we got

    def record(method: str, response: Any) -> None:
        seen.append((response.header("x-ms-request-id") or "", method, response.status))

    try:
        raw = server.raw()
        table = "loggedtable"
        record("POST", raw.create_table(table))
        record("POST", raw.insert(table, {"PartitionKey": "p", "RowKey": "r", "v": 1}))
        record("GET", raw.get_entity(table, "p", "r"))
        record("GET", raw.get_entity(table, "p", "missing"))

        sas = generate_table_sas(
            AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
            table,
            permission=TableSasPermissions(read=True, add=True, update=True),
            expiry=datetime.now(UTC) + timedelta(hours=1),
        )
        signature = dict(parse_qsl(sas))["sig"]
        assert len(signature) > 20
        anonymous = RawClient(server.port)
        record("GET", anonymous.request("GET", f"{table}()?{sas}", auth="none"))
        record(
            "POST",
            anonymous.request("POST", f"{table}?{sas}", {"PartitionKey": "p", "RowKey": "s"}, auth="none"),
        )
        bad = urlencode({**dict(parse_qsl(sas)), "sig": signature[:-4] + "AAA="})
        assert bad != sas
        record("GET", anonymous.request("GET", f"{table}()?{bad}", auth="none"))
        record(
            "GET",
            anonymous.request("GET", f"{table}(PartitionKey='p',RowKey='r')?{sas}&$select=v", auth="none"),
        )

        ids_before_sdk = len(seen)
        sdk_ids: list[str] = []
        with TableClient(
            server.endpoint,
            table,
            credential=AzureSasCredential(sas),
            retry_total=0,
            raw_response_hook=lambda r: sdk_ids.append(r.http_response.headers.get("x-ms-request-id", "")),
        ) as client:
            client.create_entity({"PartitionKey": "sdk", "RowKey": "1"})
            assert [e["RowKey"] for e in client.query_entities("PartitionKey eq 'sdk'")] == ["1"]
            with pytest.raises(HttpResponseError):
                client.delete_entity("sdk", "1")  # the SAS has no 'd'
    finally:
        code = server.stop()
    assert code is not None

    text = log_path.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    for entry in records:
        assert {"method", "path", "status", "ms", "request_id"} <= set(entry), entry
        assert "?" not in entry["path"] and "sig=" not in entry["path"], entry
        assert isinstance(entry["status"], int) and isinstance(entry["ms"], int | float), entry
    logged = {entry["request_id"]: entry for entry in records}
    assert len(logged) == len(records), "a request was logged twice"
    expected_ids = [rid for rid, _, _ in seen] + sdk_ids
    assert sorted(logged) == sorted(expected_ids), "not exactly one line per request"
    for request_id, method, status in seen[:ids_before_sdk]:
        assert (logged[request_id]["method"], logged[request_id]["status"]) == (method, status)
    for secret in {signature, quote(signature, safe=""), quote(signature), sas}:
        assert secret not in text, "the SAS signature leaked into the access log"
