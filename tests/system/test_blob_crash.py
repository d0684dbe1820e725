"""Crash safety of blob content: ``kill -9`` while uploads, block commits and appends run.

Clients upload blobs of every shape (inline-small, file-sized, staged blocks then a commit,
appends) and note each upload the server acknowledged, with the SHA-256 of what they sent.
The whole server (both workers) is killed with SIGKILL mid-flight, restarted on the same
store, and then:

* every acknowledged blob reads back byte-exact;
* every blob that is listed at all holds exactly the bytes of one upload that was attempted
  (nothing half-written is ever visible: no torn content, no blob pointing at missing bytes);
* on SQLite, content files that no record references are collected (an upload cut off by the
  kill leaves one); on PostgreSQL, no chunk row is left without a reference.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from azure.core.exceptions import AzureError
from azure.storage.blob import BlobBlock, BlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

CONTAINER = "crash"
MIB = 1024 * 1024


@dataclass
class Ledger:
    """What clients tried and what the server acknowledged, by blob name."""

    attempted: dict[str, set[str]] = field(default_factory=dict)  # name -> SHA-256 of any attempt
    acknowledged: dict[str, str] = field(default_factory=dict)  # name -> SHA-256 acknowledged last
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attempt(self, name: str, digest: str) -> None:
        with self.lock:
            self.attempted.setdefault(name, set()).add(digest)

    def ack(self, name: str, digest: str) -> None:
        with self.lock:
            self.acknowledged[name] = digest


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(params=backend_names())
def crashable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, ServerProcess]]:
    extra = ["--workers", "2"]
    extra += fresh_store(request.param)
    process = ServerProcess(tmp_path / "data", extra_args=extra).start()
    yield request.param, process
    process.stop()


def client_loop(server: ServerProcess, worker: int, ledger: Ledger, stop: threading.Event) -> None:
    service = BlobServiceClient.from_connection_string(
        server.connection_string, max_single_put_size=4 * MIB, max_block_size=MIB, retry_total=0
    )
    container = service.get_container_client(CONTAINER)
    sizes = [700, 40_000, 200_000, 2 * MIB + 3, 6 * MIB + 5]
    round_ = 0
    while not stop.is_set():
        round_ += 1
        size = sizes[(worker + round_) % len(sizes)]
        data = os.urandom(size)
        kind = round_ % 4
        name = f"w{worker}/{('put', 'app', 'blk', 'same')[kind]}{round_}"
        try:
            if kind == 3:
                # Overwrites of one name: the last acknowledged content, or the one in flight.
                name = f"w{worker}/same"
                ledger.attempt(name, sha(data))
                container.upload_blob(name, data, overwrite=True)
            elif kind == 2:
                blob = container.get_blob_client(name)
                ids = [f"{worker:02d}{round_:05d}{i:03d}" for i in range(3)]
                parts = [data[i * len(data) // 3 : (i + 1) * len(data) // 3] for i in range(3)]
                for block_id, part in zip(reversed(ids), reversed(parts), strict=True):
                    blob.stage_block(block_id, part)
                ledger.attempt(name, sha(data))
                blob.commit_block_list([BlobBlock(block_id) for block_id in ids])
            elif kind == 1:
                blob = container.get_blob_client(name)
                half = len(data) // 2
                ledger.attempt(name, sha(b""))
                blob.create_append_blob()
                ledger.attempt(name, sha(data[:half]))
                blob.append_block(data[:half])
                ledger.ack(name, sha(data[:half]))
                ledger.attempt(name, sha(data))
                blob.append_block(data[half:])
            else:
                ledger.attempt(name, sha(data))
                container.upload_blob(name, data)
        except AzureError:
            return  # the server is gone
        ledger.ack(name, sha(data))


def start_slow_upload(server: ServerProcess) -> None:
    """A large upload whose body is half sent when the server dies: its file is the orphan."""
    http = BlobHttp(server.blob_port)
    head = http.head_bytes(
        "PUT", f"/{CONTAINER}/cutoff", {"x-ms-blob-type": "BlockBlob", "Content-Length": str(64 * MIB)}
    )

    def send() -> None:
        try:
            import socket

            with socket.create_connection(("127.0.0.1", server.blob_port), timeout=30) as sock:
                sock.sendall(head)
                sock.sendall(os.urandom(20 * MIB))
                time.sleep(30)
        except OSError:
            pass

    threading.Thread(target=send, daemon=True).start()


def unreferenced_files(data_dir: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{data_dir / 'tabulae.db'}?mode=ro", uri=True)
    try:
        referenced = {
            row[0] for row in conn.execute("SELECT ref FROM blob_extents UNION SELECT ref FROM blob_blocks")
        }
        referenced |= {row[0] for row in conn.execute("SELECT ref FROM blob_garbage")}
    finally:
        conn.close()
    files = [p.name for p in (data_dir / "blobs").glob("*/*") if len(p.name) == 32]
    return [name for name in files if "f" + name not in referenced]


def orphan_chunks(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM blob_chunks c WHERE NOT EXISTS (SELECT 1 FROM blob_extents e"
            " WHERE e.dkey = c.dkey AND e.ref = c.ref) AND NOT EXISTS (SELECT 1 FROM blob_blocks b"
            " WHERE b.dkey = c.dkey AND b.ref = c.ref) AND NOT EXISTS (SELECT 1 FROM blob_garbage g"
            " WHERE g.dkey = c.dkey AND g.ref = c.ref)"
        ).fetchone()
    return int(row[0]) if row else 0


def test_kill_during_uploads_and_commits(crashable: tuple[str, ServerProcess]) -> None:
    backend, server = crashable
    BlobServiceClient.from_connection_string(server.connection_string).create_container(CONTAINER)
    ledger = Ledger()
    stop = threading.Event()
    clients = [
        threading.Thread(target=client_loop, args=(server, i, ledger, stop), daemon=True) for i in range(6)
    ]
    for client in clients:
        client.start()
    start_slow_upload(server)
    deadline = time.monotonic() + 60
    while len(ledger.acknowledged) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # and let uploads be in flight
    server.stop(signal.SIGKILL)
    stop.set()
    for client in clients:
        client.join(timeout=30)
    acknowledged = dict(ledger.acknowledged)
    assert len(acknowledged) >= 40

    if backend == "sqlite":
        assert unreferenced_files(server.data_dir), "the cut-off upload should have left a file"
    server.start()
    service = BlobServiceClient.from_connection_string(server.connection_string)
    container = service.get_container_client(CONTAINER)
    for name, digest in acknowledged.items():
        data = container.get_blob_client(name).download_blob().readall()
        if "/put" in name or "/blk" in name:
            assert sha(data) == digest, name  # written once: exactly what was acknowledged
        else:
            assert sha(data) in ledger.attempted[name], name  # later writes may have landed unanswered
    listed = list(container.list_blobs())
    for blob in listed:
        data = container.get_blob_client(blob.name).download_blob().readall()
        assert len(data) == blob.size
        assert sha(data) in ledger.attempted.get(blob.name, set()), f"{blob.name} holds bytes nobody sent"
    assert "cutoff" not in {b.name for b in listed}

    if backend == "sqlite":
        deadline = time.monotonic() + 20
        while unreferenced_files(server.data_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert unreferenced_files(server.data_dir) == []
    else:
        store = next(arg for arg in server.extra_args if arg.startswith("postgresql"))
        assert orphan_chunks(store) == 0


def test_blocks_acknowledged_just_before_a_kill_commit_byte_exact(
    crashable: tuple[str, ServerProcess],
) -> None:
    """Every Put Block answered 201 survives a ``kill -9`` that follows at once: after the
    restart, Put Block List of all of them succeeds and the blob is exactly their bytes. The
    blocks mix every way content is staged: inline-small, a file of one write, and files whose
    body arrives in many writes (the last one short)."""
    _, server = crashable
    service = BlobServiceClient.from_connection_string(server.connection_string, retry_total=0)
    container = service.get_container_client(CONTAINER)
    container.create_container()
    blob = container.get_blob_client("acked-blocks")
    sizes = [700, 64 * 1024 + 1, 300_000, 4 * MIB, 3 * MIB + 7, 1]
    parts = [os.urandom(size) for size in sizes]
    ids = [f"block-{i:03d}" for i in range(len(parts))]
    for block_id, part in zip(ids, parts, strict=True):
        blob.stage_block(block_id, part)  # returns only once the server answered 201
    server.stop(signal.SIGKILL)

    server.start()
    service = BlobServiceClient.from_connection_string(server.connection_string)
    blob = service.get_container_client(CONTAINER).get_blob_client("acked-blocks")
    blob.commit_block_list([BlobBlock(block_id) for block_id in ids])
    data = blob.download_blob().readall()
    assert len(data) == sum(sizes)
    assert sha(data) == sha(b"".join(parts))
