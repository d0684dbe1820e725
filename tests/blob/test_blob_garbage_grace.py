"""``--blob-garbage-grace`` on each store: with a short grace, the content an overwrite replaced
(without versioning) is collected within seconds instead of minutes, and on SQLite a download
under way when its content is replaced still completes intact (it holds the file it sends
open); a negative grace stops the server before it starts."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, ServerProcess

MIB = 1024 * 1024


def _held(server: ServerProcess, store: list[str]) -> Callable[[], int]:
    """How many pieces of content the store holds: SQLite's content files, PostgreSQL's extents
    (distinct refs of its chunk rows)."""
    if not store:
        root = server.data_dir / "blobs"
        return lambda: sum(1 for path in root.rglob("*") if path.is_file() and path.name != "gc.lock")
    import psycopg

    url = store[store.index("--store") + 1]

    def count() -> int:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT count(DISTINCT ref) FROM blob_chunks").fetchone()
            return int(row[0]) if row else 0

    return count


@pytest.mark.parametrize("backend", backend_names())
def test_a_short_grace_gives_replaced_content_back_within_seconds(tmp_path: Path, backend: str) -> None:
    store = fresh_store(backend)
    server = ServerProcess(
        tmp_path / "data", extra_args=[*store, "--blob-garbage-grace", "1"], backend=backend
    )
    server.start()
    try:
        held = _held(server, store)
        with BlobServiceClient.from_connection_string(server.connection_string) as service:
            blob = service.create_container("grace").get_blob_client("big")
            for _ in range(4):
                blob.upload_blob(os.urandom(MIB), overwrite=True)
            assert held() >= 2  # what the overwrites replaced is still there, for its grace
            deadline = time.monotonic() + 60  # collected every 2 s with a grace of 1 s
            while held() > 1 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert held() == 1
            assert len(blob.download_blob().readall()) == MIB
    finally:
        server.stop()


def test_a_download_under_way_outlives_a_zero_grace_on_sqlite(tmp_path: Path) -> None:
    size = 12 * MIB
    server = ServerProcess(tmp_path / "data", extra_args=["--blob-garbage-grace", "0"]).start()
    reader = socket.socket()
    try:
        held = _held(server, [])
        data = os.urandom(size)
        with BlobServiceClient.from_connection_string(server.connection_string) as service:
            container = service.create_container("inflight", public_access="blob")
            container.upload_blob("read", data)
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)  # the server waits on us
            reader.connect(("127.0.0.1", server.blob_port))
            reader.sendall(f"GET /{DEV_ACCOUNT}/inflight/read HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            received = reader.recv(64 * 1024)
            container.upload_blob("read", b"replaced", overwrite=True)  # small: kept in the database
            deadline = time.monotonic() + 60
            while held() > 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert held() == 0  # the replaced file is unlinked while it is being sent
            reader.settimeout(60)
            head, _, body = received.partition(b"\r\n\r\n")
            while len(body) < size and (piece := reader.recv(MIB)):
                body += piece
            assert head.startswith(b"HTTP/1.1 200"), head
            assert hashlib.sha256(body).digest() == hashlib.sha256(data).digest()
            assert container.get_blob_client("read").download_blob().readall() == b"replaced"
    finally:
        reader.close()
        server.stop()


@pytest.mark.parametrize("where", ["flag", "config"])
def test_a_negative_grace_is_refused(tmp_path: Path, where: str) -> None:
    args = ["--blob-garbage-grace", "-1"]
    if where == "config":
        config = tmp_path / "tabulae.toml"
        config.write_text("blob-garbage-grace = -1.0\n")
        args = ["--config", str(config)]
    result = subprocess.run(
        [sys.executable, "-m", "tabulae", "serve", "--data-dir", str(tmp_path / "data"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--blob-garbage-grace must be 0 or more seconds" in result.stderr
