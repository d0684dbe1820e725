"""``tabulae backup`` covers blob content: a copy taken while blobs are being written and
overwritten restores every blob acknowledged before it started, byte for byte, with content
files and inline content alike (page blobs' pages too), and the copy holds exactly the files its
records reference."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from azure.core.exceptions import AzureError
from azure.storage.blob import BlobServiceClient

from tests.serverproc import ServerProcess

MIB = 1024 * 1024


def test_backup_covers_blob_content(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", extra_args=["--workers", "2"]).start()
    try:
        service = BlobServiceClient.from_connection_string(
            server.connection_string, max_single_put_size=2 * MIB, max_block_size=MIB
        )
        container = service.create_container("backup")
        expected: dict[str, str] = {}
        for i, size in enumerate([10, 5000, 300_000, 3 * MIB + 7]):
            data = os.urandom(size)
            container.upload_blob(f"before{i}", data)
            expected[f"before{i}"] = hashlib.sha256(data).hexdigest()
        disk = container.get_blob_client("disk")  # a page blob: its pages are a file and a row
        disk.create_page_blob(MIB)
        pages = os.urandom(256 * 1024), os.urandom(1024)
        disk.upload_page(pages[0], offset=0, length=len(pages[0]))
        disk.upload_page(pages[1], offset=MIB - 1024, length=1024)
        content = pages[0] + bytes(MIB - len(pages[0]) - 1024) + pages[1]
        expected["disk"] = hashlib.sha256(content).hexdigest()
        stop = threading.Event()

        def churn() -> None:  # overwrites and new blobs while the copy is taken
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    container.upload_blob("churn", os.urandom(400_000), overwrite=True)
                    container.upload_blob(f"during{n}", os.urandom(100_000))
                except AzureError:
                    return

        writer = threading.Thread(target=churn)
        writer.start()
        try:
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tabulae",
                    "backup",
                    str(tmp_path / "copy"),
                    "--data-dir",
                    str(server.data_dir),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            stop.set()
            writer.join()
        assert result.returncode == 0, result.stderr
    finally:
        server.stop()

    copy = tmp_path / "copy"
    conn = sqlite3.connect(str(copy / "tabulae.db"))
    refs = {
        row[0]
        for row in conn.execute(
            "SELECT ref FROM blob_extents UNION SELECT ref FROM blob_blocks UNION SELECT ref FROM blob_pages"
        )
    }
    conn.close()
    files = {"f" + p.name for p in (copy / "blobs").glob("*/*")}
    assert files == {ref for ref in refs if ref.startswith("f")}

    restored = ServerProcess(copy).start()
    try:
        container = BlobServiceClient.from_connection_string(restored.connection_string).get_container_client(
            "backup"
        )
        for name, digest in expected.items():
            assert hashlib.sha256(container.download_blob(name).readall()).hexdigest() == digest
        for blob in container.list_blobs():  # whatever else made it in is whole
            assert len(container.download_blob(blob.name).readall()) == blob.size
        container.upload_blob("after", b"the copy takes writes")
    finally:
        restored.stop()
