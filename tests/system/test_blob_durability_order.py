"""Blob content is on disk before the record that names it commits, seen in the system calls.

A crash test cannot tell a synced file from one the kernel still holds (a killed process loses
neither), so this watches the SQLite store under ``strace``: a content file's data and its
directory entry are synced before the WAL frames of the commit naming it are written, and the
WAL is synced before the upload is answered. Small blobs travel inside the WAL itself.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, free_port
from tests.system.test_durability_order import _CALL_RE, _start_traced, _stop_traced

pytestmark = pytest.mark.timeout(120)

# a file created by path: ``openat(AT_FDCWD, "/path", O_WRONLY|O_CREAT|O_EXCL, 0600) = 7</path>``
_CREATE_RE = re.compile(r'^\d+\s+openat\(AT_FDCWD[^,]*, "([^"]+)", [A-Z_|]*O_CREAT')


def test_content_is_synced_before_its_commit(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    port = free_port()
    data_dir = tmp_path / "data"
    process = _start_traced(data_dir, trace, port, service="blob")
    try:
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{DEV_ACCOUNT};"
        )
        service = BlobServiceClient.from_connection_string(connection, max_single_put_size=2 * 1024 * 1024)
        container = service.create_container("durable")
        container.upload_blob("large", os.urandom(1024 * 1024))  # one file
        container.upload_blob("small", b"inline")  # rides in the WAL
        blob = container.get_blob_client("blocks")
        blob.stage_block("YQ==", os.urandom(300_000))
        blob.stage_block("Yg==", os.urandom(300_000))
        blob.commit_block_list(["YQ==", "Yg=="])
        append = container.get_blob_client("log")
        append.create_append_blob()
        append.append_block(os.urandom(200_000))
        assert container.download_blob("large").size == 1024 * 1024
    finally:
        _stop_traced(process)
    content_root = str(data_dir / "blobs")
    unsynced: set[str] = set()  # content files written and not yet synced
    unsynced_dirs: set[str] = set()  # directories of new files not yet synced
    wal_unsynced = False
    answered = files = created_files = 0
    for line in trace.read_text(errors="replace").splitlines():
        created = _CREATE_RE.match(line)
        if created is not None:
            path = created.group(1)
            if path.startswith(content_root + "/") and len(Path(path).name) == 32:
                # its name must reach the disk before a commit names it: the directory's sync
                # may come at any time after the creation (the store syncs it while the body
                # arrives), not necessarily after the data
                unsynced_dirs.add(str(Path(path).parent))
                created_files += 1
            continue
        match = _CALL_RE.match(line)
        if match is None:
            continue
        call, _fd, target, rest = match.groups()
        if target.startswith(content_root + "/") and len(Path(target).name) == 32:
            if call in ("pwrite64", "write", "writev"):
                if target not in unsynced:
                    files += 1
                unsynced.add(target)
            elif call in ("fsync", "fdatasync"):
                unsynced.discard(target)
        elif target in unsynced_dirs and call in ("fsync", "fdatasync"):
            unsynced_dirs.discard(target)
        elif target.endswith("tabulae.db-wal"):
            if call in ("pwrite64", "write", "writev"):
                assert not unsynced, f"a commit was written while content was unsynced: {unsynced}"
                assert not unsynced_dirs, (
                    f"a commit was written before new names were synced: {unsynced_dirs}"
                )
                wal_unsynced = True
            elif call in ("fsync", "fdatasync"):
                wal_unsynced = False
        elif ("socket:" in target or "TCP" in target) and '"HTTP/1.1 20' in rest:
            status = rest.split('"HTTP/1.1 ', 1)[1][:3]
            if status in ("201", "202"):
                answered += 1
                assert not wal_unsynced, "a write was answered before its commit was synced"
    assert files == created_files == 4  # the large blob, two blocks and the appended block
    assert answered == 8  # container, two uploads, two blocks, the commit, the append blob, the append
