"""Crash safety of versioned overwrites: ``kill -9`` while clients overwrite blobs on an account
with blob versioning.

Each client overwrites one blob again and again with content of every size (inline-small to
several MiB, so that the kill lands while a body is still streaming in) and notes, for every
write the server acknowledged, the version id it answered and the SHA-256 of what it sent. The
whole server is killed with SIGKILL mid-flight, restarted on the same store, and then:

* every acknowledged version reads back byte-exact by its ``versionid``;
* each blob has exactly one current version, which is the last acknowledged one or one write
  the kill cut off before its answer (never torn content: the bytes of one attempted write);
* the versions listed are in id order and each holds the bytes of one attempted write.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

CONTAINER = "vcrash"
MIB = 1024 * 1024


@dataclass
class Ledger:
    attempted: dict[str, set[str]] = field(default_factory=dict)  # blob -> SHA-256 of any attempt
    acknowledged: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # blob -> (id, sha)
    lock: threading.Lock = field(default_factory=threading.Lock)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(params=backend_names())
def crashable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    extra = ["--workers", "2", "--blob-versioning", *fresh_store(request.param)]
    process = ServerProcess(tmp_path / "data", extra_args=extra).start()
    yield process
    process.stop()


def overwrite(server: ServerProcess, worker: int, ledger: Ledger, stop: threading.Event) -> None:
    service = BlobServiceClient.from_connection_string(
        server.connection_string, max_single_put_size=4 * MIB, max_block_size=MIB, retry_total=0
    )
    blob = service.get_container_client(CONTAINER).get_blob_client(f"w{worker}")
    sizes = [300, 50_000, 2 * MIB + 7, 6 * MIB + 1]
    round_ = 0
    while not stop.is_set():
        round_ += 1
        data = os.urandom(sizes[(worker + round_) % len(sizes)])
        with ledger.lock:
            ledger.attempted.setdefault(blob.blob_name, set()).add(sha(data))
        try:
            answer = blob.upload_blob(data, overwrite=True)
        except AzureError:
            return  # the server is gone
        with ledger.lock:
            ledger.acknowledged.setdefault(blob.blob_name, []).append((answer["version_id"], sha(data)))


def test_kill_during_versioned_overwrites(crashable: ServerProcess) -> None:
    server = crashable
    BlobServiceClient.from_connection_string(server.connection_string).create_container(CONTAINER)
    ledger = Ledger()
    stop = threading.Event()
    clients = [
        threading.Thread(target=overwrite, args=(server, i, ledger, stop), daemon=True) for i in range(4)
    ]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 60
    while sum(len(acks) for acks in ledger.acknowledged.values()) < 24 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # and let overwrites be in flight
    server.stop(signal.SIGKILL)
    stop.set()
    for client in clients:
        client.join(timeout=30)
    acknowledged = {name: list(acks) for name, acks in ledger.acknowledged.items()}
    assert sum(len(acks) for acks in acknowledged.values()) >= 24

    server.start()
    container = BlobServiceClient.from_connection_string(server.connection_string).get_container_client(
        CONTAINER
    )
    for name, acks in acknowledged.items():
        blob = container.get_blob_client(name)
        for version_id, digest in acks:
            assert sha(blob.download_blob(version_id=version_id).readall()) == digest, (name, version_id)
        listed = [
            b for b in container.list_blobs(name_starts_with=name, include=["versions"]) if b.name == name
        ]
        ids = [b.version_id for b in listed]
        assert ids == sorted(ids) and {v for v, _ in acks} <= set(ids)
        current = [b for b in listed if b.is_current_version]
        assert len(current) == 1 and current[0].version_id == ids[-1]
        last_acked = acks[-1][0]
        assert (
            current[0].version_id == last_acked
            or ids.index(current[0].version_id) == ids.index(last_acked) + 1
        )
        props = blob.get_blob_properties()
        assert props.version_id == current[0].version_id
        assert sha(blob.download_blob().readall()) in ledger.attempted[name]
        for version_id in ids:
            data = blob.download_blob(version_id=version_id).readall()
            assert sha(data) in ledger.attempted[name], f"{name} {version_id} holds bytes nobody sent"
