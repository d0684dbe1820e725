"""Rename (``x-ms-rename-source``) on every store, Citus included: there a row's distribution key
cannot be updated, so the rows (and content chunks) of a renamed tree move by delete and insert
in one distributed transaction. What a rename carries along: multi-chunk content, staged blocks,
a lease and its conditions, a move to another file system; and a concurrent lister sees the old
tree or the new one, never a mix."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


def _names(fs: FileSystemClient) -> list[str]:
    return [path.name for path in fs.get_paths(recursive=True)]


def test_content_and_staged_blocks_follow_the_rename(fs: FileSystemClient, lake: ServerProcess) -> None:
    big = bytes(range(256)) * (5 * 1024 * 1024 // 256 + 7)  # more than one 4 MiB content chunk
    fs.create_file("d/big.bin").upload_data(big, overwrite=True)
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    staged = blobs.get_blob_client(fs.file_system_name, "d/staged.bin")
    staged.upload_blob(b"committed")
    staged.stage_block("b1", b"staged ")
    staged.stage_block("b2", b"blocks")
    fs.create_directory("e")
    fs.get_directory_client("d").rename_directory(f"{fs.file_system_name}/e/moved")
    assert fs.get_file_client("e/moved/big.bin").download_file().readall() == big
    moved = blobs.get_blob_client(fs.file_system_name, "e/moved/staged.bin")
    assert moved.download_blob().readall() == b"committed"
    moved.commit_block_list(["b1", "b2"])
    assert moved.download_blob().readall() == b"staged blocks"
    assert [n for n in _names(fs) if not n.startswith("e")] == []


def test_rename_into_another_file_system(fs: FileSystemClient, service: DataLakeServiceClient) -> None:
    other = service.create_file_system("fs" + uuid.uuid4().hex[:12])
    try:
        fs.create_file("tree/a/1.txt").upload_data(b"one", overwrite=True)
        fs.create_file("tree/2.txt").upload_data(b"two", overwrite=True)
        fs.get_directory_client("tree").rename_directory(f"{other.file_system_name}/landed")
        assert _names(fs) == []
        assert _names(other) == ["landed", "landed/2.txt", "landed/a", "landed/a/1.txt"]
        assert other.get_file_client("landed/a/1.txt").download_file().readall() == b"one"
    finally:
        other.delete_file_system()


def test_rename_with_a_lease_and_conditions(fs: FileSystemClient) -> None:
    file = fs.create_file("leased.txt")
    file.upload_data(b"held", overwrite=True)
    etag = file.get_file_properties().etag
    lease = file.acquire_lease(lease_duration=60)
    unchanged = MatchConditions.IfNotModified
    with pytest.raises(HttpResponseError) as refused:
        file.rename_file(f"{fs.file_system_name}/stale.txt", source_etag='"0x1"',
                         source_match_condition=unchanged, source_lease=lease)  # fmt: skip
    assert refused.value.status_code == 412
    renamed = file.rename_file(f"{fs.file_system_name}/renamed.txt", source_etag=etag,
                               source_match_condition=unchanged, source_lease=lease)  # fmt: skip
    assert renamed.download_file().readall() == b"held"
    assert _names(fs) == ["renamed.txt"]


def test_concurrent_listers_never_see_half_a_renamed_tree(fs: FileSystemClient, lake: ServerProcess) -> None:
    """2,000 files (20 directories of 100) renamed back and forth while three other clients list
    the file system, each listing one page: every listing holds all of one tree and nothing of
    the other. (On Citus a listing reads every shard, each node in a snapshot of its own, so
    without the listing lock some listings saw both trees in part.)"""
    files, per_dir = 2000, 100
    for index in range(files // per_dir):
        fs.create_directory(f"old/d{index:02d}")

    def make(index: int) -> None:
        fs.get_file_client(f"old/d{index // per_dir:02d}/f{index:04d}").create_file()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(make, range(files)))
    whole = 1 + files // per_dir + files
    done = threading.Event()
    seen: list[tuple[int, int]] = []

    def lister() -> None:
        own = DataLakeServiceClient.from_connection_string(lake.connection_string)
        client = own.get_file_system_client(fs.file_system_name)
        listings = 0
        while listings < 200 and (not done.is_set() or listings == 0):
            tops = [name.partition("/")[0] for name in _names(client)]
            seen.append((tops.count("old"), tops.count("new")))
            listings += 1

    with ThreadPoolExecutor(3) as pool:
        watching = [pool.submit(lister) for _ in range(3)]
        name, other = "old", "new"
        for _turn in range(10):
            fs.get_directory_client(name).rename_directory(f"{fs.file_system_name}/{other}")
            name, other = other, name
        done.set()
        for future in watching:
            future.result(timeout=600)
    assert seen
    assert all(counts in ((whole, 0), (0, whole)) for counts in seen), sorted(set(seen))
    final = _names(fs)
    assert final[0] == "old" and len(final) == whole


def test_a_renamed_path_keeps_its_etag_and_last_modified(fs: FileSystemClient, lake: ServerProcess) -> None:
    """Azure answers a rename, and reads at the new name, with the source's ETag and
    Last-Modified, for a file and for a directory (recorded for azure-storage-file-datalake's
    test_rename_file_with_non_used_name and test_rename_from); the descendants of a renamed
    directory keep theirs too."""
    file = fs.create_file("f.txt")
    file.upload_data(b"abc", overwrite=True)
    before = file.get_file_properties()
    time.sleep(1.1)  # a new Last-Modified would differ by at least a second
    renamed = file.rename_file(f"{fs.file_system_name}/g.txt")
    after = renamed.get_file_properties()
    assert (after.etag, after.last_modified) == (before.etag, before.last_modified)

    directory = fs.create_directory("d")
    child = fs.create_file("d/child.txt")
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    container = blobs.get_container_client(fs.file_system_name)
    was = {name: container.get_blob_client(name).get_blob_properties() for name in ("d", "d/child.txt")}
    assert child.exists()
    time.sleep(1.1)

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            source = service.get_directory_client(fs.file_system_name, "d")
            await source.rename_directory(f"{fs.file_system_name}/e")

    asyncio.run(scenario())
    assert not directory.exists()
    for old, new in (("d", "e"), ("d/child.txt", "e/child.txt")):
        now = container.get_blob_client(new).get_blob_properties()
        assert (now.etag, now.last_modified) == (was[old].etag, was[old].last_modified)


def test_the_rename_response_carries_the_source_etag(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    fs.create_file("raw.txt").upload_data(b"x", overwrite=True)
    head = http.request("HEAD", f"/{name}/raw.txt")
    moved = http.request("PUT", f"/{name}/moved.txt?mode=legacy", {"x-ms-rename-source": f"/{name}/raw.txt"})
    assert moved.status == 201
    assert (moved.headers["etag"], moved.headers["last-modified"]) == (
        head.headers["etag"],
        head.headers["last-modified"],
    )
