"""Blob content streams: uploading and downloading a blob much larger than the memory budget
raises the server's RSS by far less than the blob (a 256 MiB blob here, under 64 MiB of growth;
``benchmarks/compare.py --blob-memory`` measures the 1 GiB case)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess

MIB = 1024 * 1024
SIZE = 256 * MIB
BUDGET = 64 * MIB
PIECE = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(2048)) * 16  # 1 MiB


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Peak:
    """The highest RSS of ``pid`` while it runs (sampled every 20 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.value = rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.value = max(self.value, rss(self.pid))
            time.sleep(0.02)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *args: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(params=backend_names())
def single_worker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    extra = ["--workers", "1"]
    extra += fresh_store(request.param)
    process = ServerProcess(tmp_path / "data", extra_args=extra).start()
    yield process
    process.stop()


def test_large_upload_and_download_stream(single_worker: ServerProcess) -> None:
    server = single_worker
    assert server.process is not None
    pid = server.process.pid
    service = BlobServiceClient.from_connection_string(server.connection_string)
    service.create_container("memory")
    service.get_blob_client("memory", "warm").upload_blob(PIECE)  # warm the code paths up
    service.get_blob_client("memory", "warm").download_blob().readall()
    before = rss(pid)
    http = BlobHttp(server.blob_port)
    head = http.head_bytes(
        "PUT", "/memory/big", {"x-ms-blob-type": "BlockBlob", "Content-Length": str(SIZE)}
    )  # one Put Blob of 256 MiB, its body streamed in 1 MiB pieces
    digest = hashlib.md5()
    with Peak(pid) as upload_peak:
        connection = HTTPConnection("127.0.0.1", server.blob_port, timeout=120)
        connection.connect()
        assert connection.sock is not None
        connection.sock.sendall(head)
        for _ in range(SIZE // MIB):
            connection.sock.sendall(PIECE)
            digest.update(PIECE)
        answer = connection.sock.recv(4096)
        connection.close()
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    with Peak(pid) as download_peak:
        stream = service.get_blob_client("memory", "big").download_blob(max_concurrency=1)
        check = hashlib.md5()
        received = 0
        for chunk in stream.chunks():
            check.update(chunk)
            received += len(chunk)
    assert received == SIZE and check.digest() == digest.digest()
    assert upload_peak.value - before < BUDGET, (
        f"upload grew RSS by {(upload_peak.value - before) / MIB:.0f} MiB"
    )
    assert download_peak.value - before < BUDGET, (
        f"download grew RSS by {(download_peak.value - before) / MIB:.0f} MiB"
    )


def test_query_streams(single_worker: ServerProcess) -> None:
    """Query Blob Contents reads the blob as it streams and sends its answer in pieces: a
    60 MiB CSV blob passes whole through ``SELECT *`` with the server's RSS growing by under
    32 MiB (what grows is set by the store's chunks as they are read and decoded, never by the
    blob's size)."""
    server = single_worker
    assert server.process is not None
    pid = server.process.pid
    service = BlobServiceClient.from_connection_string(server.connection_string)
    service.create_container("querymem")
    blob = service.get_blob_client("querymem", "rows.csv")
    row = b"%08d,abcdefghijklmnopqrstuvwxyz,0123456789,%s\n"
    body = b"".join(row % (i, b"x" * (i % 7)) for i in range(1_200_000))  # about 60 MiB
    blob.upload_blob(body)
    blob.query_blob("SELECT COUNT(*) FROM BlobStorage WHERE _1 = '00000001'").readall()  # warm up
    before = rss(pid)
    with Peak(pid) as peak:
        digest, size = hashlib.md5(), 0
        for piece in blob.query_blob("SELECT * FROM BlobStorage")._iter_stream():
            digest.update(piece)
            size += len(piece)
    assert size == len(body) and digest.digest() == hashlib.md5(body).digest()
    assert peak.value - before < BUDGET // 2, f"the query grew RSS by {(peak.value - before) / MIB:.0f} MiB"
