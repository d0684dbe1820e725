"""Blob index tags on an HNS account follow the namespace's own operations, on every store: a
rename of a file or of a directory (within a file system and into another) moves the tags with
the paths, so Get Blob Tags answers at the new names and Find Blobs by Tags (on the account and
in a file system) finds the new names only; a delete (a file, a recursive directory delete in
pieces, a soft delete) leaves no name behind in Find, and an undelete brings the tags back with
the paths, as Azure keeps a blob's tags with the blob."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.storage.blob import BlobServiceClient, RetentionPolicy
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, ServerProcess

BATCH = 3  # descendants one recursive delete removes before answering a continuation


@pytest.fixture(scope="module", params=backend_names())
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("tagsfollow")
    process = ServerProcess(
        tmp / "data", extra_args=[*fresh_store(request.param), "--hns", DEV_ACCOUNT], backend=request.param
    )
    process.env = {**os.environ, "TABULAE_TEST_DFS_DELETE_BATCH": str(BATCH)}
    process.start()
    yield process
    process.stop()


@pytest.fixture
def blobs(lake: ServerProcess) -> Iterator[BlobServiceClient]:
    with BlobServiceClient.from_connection_string(lake.connection_string) as client:
        yield client


def _retention(blobs: BlobServiceClient, days: int | None) -> None:
    blobs.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=days is not None, days=days))
    time.sleep(1.2)  # the service reads the policy again after a second at most


def _tagged(fs: FileSystemClient, names: list[str], value: str) -> None:
    for name in names:
        file = fs.create_file(name)
        file.upload_data(name.encode(), overwrite=True)
        file.set_tags({"project": value, "path": name})


def _found(blobs: BlobServiceClient, value: str) -> list[tuple[str, str]]:
    """(file system, name) of every path the account finds tagged ``value``."""
    return sorted((b.container_name, b.name) for b in blobs.find_blobs_by_tags(f"\"project\" = '{value}'"))


def _found_in(blobs: BlobServiceClient, fs: FileSystemClient, value: str) -> list[str]:
    container = blobs.get_container_client(fs.file_system_name)
    return sorted(b.name for b in container.find_blobs_by_tags(f"\"project\" = '{value}'"))


def test_a_renamed_file_keeps_its_tags_under_its_new_name(
    fs: FileSystemClient, blobs: BlobServiceClient
) -> None:
    value = uuid.uuid4().hex
    _tagged(fs, ["old.txt"], value)
    fs.get_file_client("old.txt").rename_file(f"{fs.file_system_name}/new.txt")
    assert fs.get_file_client("new.txt").get_tags() == {"project": value, "path": "old.txt"}
    assert _found(blobs, value) == [(fs.file_system_name, "new.txt")]
    assert _found_in(blobs, fs, value) == ["new.txt"]
    found = list(blobs.find_blobs_by_tags(f"\"project\" = '{value}' AND \"path\" = 'old.txt'"))
    assert [b.name for b in found] == ["new.txt"]  # every tag row moved, not only the first


def test_a_renamed_directory_moves_the_tags_of_its_tree(
    fs: FileSystemClient, blobs: BlobServiceClient
) -> None:
    value = uuid.uuid4().hex
    _tagged(fs, ["d/a.txt", "d/sub/b.txt", "dx.txt"], value)  # dx.txt sorts beside d/ but is not in it
    fs.create_directory("e")
    fs.get_directory_client("d").rename_directory(f"{fs.file_system_name}/e/moved")
    name = fs.file_system_name
    assert _found(blobs, value) == [(name, "dx.txt"), (name, "e/moved/a.txt"), (name, "e/moved/sub/b.txt")]
    assert fs.get_file_client("e/moved/sub/b.txt").get_tags() == {"project": value, "path": "d/sub/b.txt"}
    fs.create_file("d/a.txt")  # the old name, made again, has no tags
    assert fs.get_file_client("d/a.txt").get_tags() == {}
    assert _found_in(blobs, fs, value) == ["dx.txt", "e/moved/a.txt", "e/moved/sub/b.txt"]


def test_a_rename_into_another_file_system_moves_the_tags(
    fs: FileSystemClient, service: DataLakeServiceClient, blobs: BlobServiceClient
) -> None:
    value = uuid.uuid4().hex
    other = service.create_file_system("fs" + uuid.uuid4().hex[:12])
    try:
        _tagged(fs, ["tree/1.txt", "tree/a/2.txt", "lone.txt"], value)
        fs.get_directory_client("tree").rename_directory(f"{other.file_system_name}/landed")
        fs.get_file_client("lone.txt").rename_file(f"{other.file_system_name}/lone.txt")
        there = other.file_system_name
        assert _found(blobs, value) == [
            (there, "landed/1.txt"),
            (there, "landed/a/2.txt"),
            (there, "lone.txt"),
        ]
        assert _found_in(blobs, fs, value) == []
        assert other.get_file_client("landed/a/2.txt").get_tags() == {
            "project": value,
            "path": "tree/a/2.txt",
        }
    finally:
        other.delete_file_system()


def test_a_rename_over_a_tagged_file_keeps_the_source_tags(
    fs: FileSystemClient, blobs: BlobServiceClient
) -> None:
    value = uuid.uuid4().hex
    _tagged(fs, ["src.txt", "dst.txt"], value)
    fs.get_file_client("src.txt").rename_file(f"{fs.file_system_name}/dst.txt")
    assert _found_in(blobs, fs, value) == ["dst.txt"]
    assert fs.get_file_client("dst.txt").get_tags() == {"project": value, "path": "src.txt"}


def test_deleted_paths_are_gone_from_find(fs: FileSystemClient, blobs: BlobServiceClient) -> None:
    """A file delete, and a recursive delete of a tree larger than one piece (the SDK follows
    the continuation): nothing of either is found afterwards."""
    value = uuid.uuid4().hex
    tree = [f"big/{i}/f.txt" for i in range(2 * BATCH + 1)]
    _tagged(fs, ["one.txt", "keep.txt", *tree], value)
    fs.get_file_client("one.txt").delete_file()
    fs.get_directory_client("big").delete_directory()
    assert _found(blobs, value) == [(fs.file_system_name, "keep.txt")]
    assert _found_in(blobs, fs, value) == ["keep.txt"]


def test_soft_deleted_paths_leave_find_and_come_back_with_their_tags(
    fs: FileSystemClient, blobs: BlobServiceClient
) -> None:
    value = uuid.uuid4().hex
    _retention(blobs, 2)
    try:
        _tagged(fs, ["soft/a.txt", "soft/b/c.txt", "file.txt"], value)
        deleted = fs.get_directory_client("soft").delete_directory()
        gone = fs.get_file_client("file.txt").delete_file()
        assert _found(blobs, value) == []
        fs._undelete_path("soft", deleted["deletion_id"])
        fs._undelete_path("file.txt", gone["deletion_id"])
    finally:
        _retention(blobs, None)
    assert _found_in(blobs, fs, value) == ["file.txt", "soft/a.txt", "soft/b/c.txt"]
    assert fs.get_file_client("soft/b/c.txt").get_tags() == {"project": value, "path": "soft/b/c.txt"}


def test_an_undeleted_tree_larger_than_a_page_gets_every_tag_back(
    fs: FileSystemClient, blobs: BlobServiceClient
) -> None:
    """The undelete restores its records' index tags a page (1,000 records) at a time."""
    value = uuid.uuid4().hex
    names = [f"big/{n // 100}/{n:04}.txt" for n in range(1_003)]
    container = blobs.get_container_client(fs.file_system_name)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: container.upload_blob(name, b"x", tags={"project": value}), names))
    _retention(blobs, 2)
    try:
        deleted = fs.get_directory_client("big").delete_directory()
        assert _found(blobs, value) == []
        fs._undelete_path("big", deleted["deletion_id"])
    finally:
        _retention(blobs, None)
    assert _found_in(blobs, fs, value) == sorted(names)
