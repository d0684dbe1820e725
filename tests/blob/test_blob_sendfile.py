"""Downloads sent straight from content files (``sendfile``) arrive byte for byte: whole blobs,
ranges across extents kept inline and in files, a blob of many blocks, several requests on one
kept-alive connection, and a download under way while its blob is overwritten and the old
content collected. Each runs over plain HTTP (where SQLite's files go out by ``sendfile``) and
over TLS (where they are read, as PostgreSQL's chunk rows always are), on every store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from azure.storage.blob import BlobBlock, BlobServiceClient

import tabulae.storage.postgres.blobs as pg_blobs
import tabulae.storage.sqlite.blobs as sqlite_blobs
from tabulae.storage.factory import open_stores
from tests.backends import backend_names
from tests.blobhttp import sign
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import SelfSignedCert

KIB = 1024
MIB = 1024 * KIB


def pattern(size: int, seed: str) -> bytes:
    """``size`` bytes that differ at every offset from any shifted copy (a misplaced piece shows)."""
    block = b"".join(hashlib.sha256(f"{seed}{i}".encode()).digest() for i in range(2048))  # 64 KiB
    return (block * (size // len(block) + 1))[:size]


@dataclass
class Target:
    server: ServerProcess
    store: str | None  # the --store URL, None for SQLite's data directory
    cert: SelfSignedCert | None  # TLS when set

    @property
    def scheme(self) -> str:
        return "https" if self.cert else "http"

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.blob_port}/{DEV_ACCOUNT}"

    def client(self) -> BlobServiceClient:
        return BlobServiceClient(
            self.endpoint,
            credential={"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
            connection_verify=str(self.cert.cert) if self.cert else True,
            max_single_get_size=1 * MIB,
            max_chunk_get_size=1 * MIB + 7,  # chunks that do not line up with the blocks
        )

    def connection(self) -> http.client.HTTPConnection:
        if self.cert is not None:
            return http.client.HTTPSConnection(
                "127.0.0.1", self.server.blob_port, timeout=60, context=self.cert.ssl_context()
            )
        return http.client.HTTPConnection("127.0.0.1", self.server.blob_port, timeout=60)


def get(
    conn: http.client.HTTPConnection, target: Target, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A signed GET on a kept-alive connection: status, headers (lower-case names) and body."""
    url = target.endpoint + path
    signed = sign("GET", url, dict(headers or {}))
    conn.putrequest("GET", urlsplit(url).path, skip_accept_encoding=True)
    for name, value in signed.items():
        conn.putheader(name, value)
    conn.endheaders()
    response = conn.getresponse()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


@pytest.fixture(
    scope="module",
    params=[(backend, tls) for backend in backend_names() for tls in (False, True)],
    ids=lambda p: f"{p[0]}-{'tls' if p[1] else 'http'}",
)
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[Target]:
    backend, tls = request.param
    extra = ["--workers", "1", *fresh_store(backend)]
    if tls:
        extra += ["--cert", str(cert.cert), "--key", str(cert.key)]
    server = ServerProcess(tmp_path_factory.mktemp("data"), extra_args=extra, backend=backend).start()
    store = extra[extra.index("--store") + 1] if "--store" in extra else None
    yield Target(server, store, cert if tls else None)
    server.stop()


def test_whole_blob_is_byte_exact(target: Target) -> None:
    service = target.client()
    container = service.get_container_client("whole")
    container.create_container()
    sizes = [64 * KIB + 1, 3 * MIB + 5, 9 * MIB]  # just past inline, a few pieces, many pieces
    blobs = {f"b{size}": pattern(size, f"whole{size}") for size in sizes}
    for name, data in blobs.items():
        container.upload_blob(name, data)  # one Put Blob each: one extent, one file
    conn = target.connection()
    try:
        for _ in range(2):  # every response on one kept-alive connection, twice
            for name, data in blobs.items():
                status, headers, body = get(conn, target, f"/whole/{name}")
                assert status == 200
                assert int(headers["content-length"]) == len(data)
                assert body == data
    finally:
        conn.close()


def test_blob_of_many_blocks_whole_and_in_ranges(target: Target) -> None:
    service = target.client()
    container = service.get_container_client("blocks")
    container.create_container()
    blob = container.get_blob_client("mixed")
    # Blocks kept inline (64 KiB and less) and in files, so ranges cross both kinds of extent.
    sizes = [70 * KIB, 1 * KIB, 2 * MIB + 3, 64 * KIB, 100, 1 * MIB, 65 * KIB, 3 * MIB + 11, 7]
    parts = [pattern(size, f"block{i}") for i, size in enumerate(sizes)]
    ids = [f"{i:04d}" for i in range(len(parts))]
    for block_id, part in zip(ids, parts, strict=True):
        blob.stage_block(block_id, part)
    blob.commit_block_list([BlobBlock(block_id) for block_id in ids])
    data = b"".join(parts)
    assert blob.download_blob(max_concurrency=3).readall() == data  # the SDK's ranged chunks
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    ranges = [
        (0, len(data) - 1),
        (1, len(data) - 2),
        (bounds[1] - 5, bounds[3] + 5),  # the end of a file, a small inline block, into a file
        (bounds[2] + 17, bounds[2] + 1 * MIB),  # inside one file, unaligned
        (bounds[3] - 1, bounds[7] + 1),  # inline and file extents alternating
        (bounds[5], bounds[6] - 1),  # exactly one file
        (bounds[7] + 3 * MIB, len(data) + 1000),  # the last bytes, the range past the end
        (bounds[1] + 2, bounds[1] + 900),  # inside an inline extent
    ]
    conn = target.connection()
    try:
        for start, last in ranges:
            status, headers, body = get(
                conn, target, "/blocks/mixed", {"x-ms-range": f"bytes={start}-{last}"}
            )
            end = min(last + 1, len(data))
            assert status == 206, (start, last)
            assert headers["content-range"] == f"bytes {start}-{end - 1}/{len(data)}"
            assert body == data[start:end], (start, last)
    finally:
        conn.close()


def test_download_under_way_survives_an_overwrite_and_collection(target: Target) -> None:
    """The download's extents are dropped by an overwrite and (on SQLite, where the grace period
    is waived here) their files deleted by the collector while the response is half sent: the
    rest still arrives, byte for byte, from the file the download holds open."""
    service = target.client()
    container = service.get_container_client("churn")
    container.create_container()
    old = pattern(24 * MIB, "old")
    container.upload_blob("hot", old)
    conn = target.connection()
    try:
        url = target.endpoint + "/churn/hot"
        signed = sign("GET", url, {})
        conn.putrequest("GET", urlsplit(url).path, skip_accept_encoding=True)
        for name, value in signed.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 200
        first = response.read(1 * MIB)  # the server is sending; the client reads slowly from here
        new = pattern(5 * MIB, "new")
        container.upload_blob("hot", new, overwrite=True)
        removed = asyncio.run(_collect(target))
        if target.store is None:
            assert removed >= 1  # the old content's file is gone from the directory
        rest = response.read()
        assert first + rest == old
        status, _, body = get(conn, target, "/churn/hot")  # the connection goes on serving
        assert status == 200 and body == new
    finally:
        conn.close()


async def _collect(target: Target) -> int:
    """Run the store's collector from here, a second process over the same store, with no
    grace period on SQLite (its files are held open by downloads) and the usual one on
    PostgreSQL (whose downloads read chunk rows the collector would delete)."""
    stores = await open_stores(target.store, target.server.data_dir, False)
    try:
        sqlite = isinstance(stores.blobs, sqlite_blobs.SqliteBlobs)
        return await stores.blobs.collect_garbage(-1.0 if sqlite else pg_blobs.GARBAGE_GRACE_SECONDS)
    finally:
        await stores.close()


def test_plain_http_downloads_use_sendfile_and_tls_does_not(target: Target, tmp_path: Path) -> None:
    """What the server process asks of the kernel while it serves a download (strace): its
    file's bytes go out by ``sendfile`` over plain HTTP on SQLite, and never over TLS."""
    service = target.client()
    container = service.get_container_client("zerocopy")
    container.create_container()
    data = pattern(4 * MIB, "zero")
    container.upload_blob("z", data)
    assert target.server.process is not None
    with traced(target.server.process.pid, tmp_path / "sendfile.strace") as log:
        conn = target.connection()
        try:
            status, _, body = get(conn, target, "/zerocopy/z")
        finally:
            conn.close()
        zero_copy = target.store is None and target.cert is None
        # the client can hold every byte before the last sendfile returns and strace logs it
        deadline = time.monotonic() + 10
        while zero_copy and _sendfile_bytes(log.read_text()) < len(data) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert status == 200 and body == data
    sent = _sendfile_bytes(log.read_text())
    if zero_copy:
        assert sent == len(data)
    else:
        assert sent == 0


@contextlib.contextmanager
def traced(pid: int, log: Path) -> Iterator[Path]:
    """``sendfile`` calls of every thread of ``pid``, logged by strace to ``log`` while inside."""
    assert shutil.which("strace"), "strace is needed to see which system calls send a download"
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-e", "trace=sendfile", "-e", "signal=none", "-o", str(log), "-p", str(pid)]
    )
    try:
        deadline = time.monotonic() + 60
        while not _all_traced(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _all_traced(pid), "strace did not attach"
        yield log
    finally:
        tracer.terminate()
        tracer.wait(timeout=60)


def _all_traced(pid: int) -> bool:
    """Whether every thread of ``pid`` has a tracer."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        if "TracerPid:\t0\n" in status:
            return False
    return True


def _sendfile_bytes(trace: str) -> int:
    """The bytes that successful ``sendfile`` calls in an strace log sent (a call strace split
    into "unfinished" and "resumed" lines counts once, on its resumed line)."""
    total = 0
    for line in trace.splitlines():
        if "sendfile" in line and "= " in line:
            result = line.rsplit("= ", 1)[1].split()[0]
            if result.isdigit():
                total += int(result)
    return total
