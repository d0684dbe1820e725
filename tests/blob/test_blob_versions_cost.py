"""What versions and soft delete cost in storage, measured on SQLite's own tables and files:
overwriting a blob N times keeps N contents with versioning on and one with it off; deleting
every version under a retention keeps their bytes until the purge, which hands them to the
garbage collection (whose grace period then frees the files)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from azure.storage.blob import BlobServiceClient, RetentionPolicy

from tests.serverproc import ServerProcess

MIB = 1024 * 1024
N = 10
DAY = 86_400


def stored(data_dir: Path) -> tuple[int, int]:
    """(bytes of content some record names, extents waiting in the garbage)."""
    conn = sqlite3.connect(f"file:{data_dir / 'tabulae.db'}?mode=ro", uri=True)
    try:
        named = conn.execute(
            "SELECT coalesce(sum(length), 0) FROM (SELECT DISTINCT ref, length FROM blob_extents)"
        )
        garbage = conn.execute("SELECT count(*) FROM blob_garbage")
        return int(named.fetchone()[0]), int(garbage.fetchone()[0])
    finally:
        conn.close()


def overwrite(server: ServerProcess, container: str) -> BlobServiceClient:
    service = BlobServiceClient.from_connection_string(server.connection_string)
    blob = service.create_container(container).get_blob_client("big")
    for _ in range(N):
        blob.upload_blob(os.urandom(MIB), overwrite=True)
    return service


def test_versions_keep_every_content_and_a_purge_returns_it(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text("0")
    plain = ServerProcess(tmp_path / "plain").start()
    try:
        overwrite(plain, "plain")
        assert stored(plain.data_dir)[0] == MIB  # the other N - 1 contents are garbage
    finally:
        plain.stop()
    versioned = ServerProcess(tmp_path / "versioned", extra_args=["--blob-versioning", "--workers", "1"])
    versioned.env = {**os.environ, "TABULAE_TEST_CLOCK_FILE": str(clock), "TABULAE_TEST_PURGE_SECONDS": "0.5"}
    versioned.start()
    try:
        service = overwrite(versioned, "versioned")
        assert stored(versioned.data_dir) == (N * MIB, 0)
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=1))
        container = service.get_container_client("versioned")
        blob = container.get_blob_client("big")
        blob.delete_blob()
        for listed in list(container.list_blobs(include=["versions"])):
            blob.delete_blob(version_id=listed.version_id)
        assert [b.deleted for b in container.list_blobs(include=["versions", "deleted"])] == [True] * N
        assert stored(versioned.data_dir) == (N * MIB, 0)  # soft-deleted: every byte kept
        clock.write_text(repr(2.0 * DAY))
        deadline = time.monotonic() + 60
        while stored(versioned.data_dir)[0] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert stored(versioned.data_dir) == (0, N)  # purged: every content handed to the garbage
    finally:
        versioned.stop()
