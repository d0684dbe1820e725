"""The end of a path's life on an HNS account, through ``azure-storage-file-datalake`` (sync and
aio) and raw HTTP, on every store: soft delete (List Deleted Paths, Undelete Path with the
deletion id, purge once the retention has passed), expiry (an expired file reads 404 and is left
out of listings at once, and the sweep deletes it), and the recursive delete of a directory too
large for one request (``x-ms-continuation``, which the SDK follows)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, RetentionPolicy
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, ServerProcess

DAY = 86_400
BATCH = 7  # descendants one recursive delete removes before answering a continuation


class Clock:
    """The server's retention clock, moved forward by writing seconds into its file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.shift = 0.0
        path.write_text("0")

    def advance(self, seconds: float) -> None:
        self.shift += seconds
        self.path.write_text(repr(self.shift))


def _start(tmp: Path, backend: str) -> tuple[ServerProcess, Clock]:
    clock = Clock(tmp / "clock")
    process = ServerProcess(
        tmp / "data", extra_args=[*fresh_store(backend), "--hns", DEV_ACCOUNT], backend=backend
    )
    process.env = {
        **os.environ,
        "TABULAE_TEST_CLOCK_FILE": str(clock.path),
        "TABULAE_TEST_PURGE_SECONDS": "0.5",
        "TABULAE_TEST_DFS_DELETE_BATCH": str(BATCH),
    }
    process.start()
    return process, clock


@pytest.fixture(scope="module", params=backend_names())
def lake(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, Clock]]:
    process, clock = _start(tmp_path_factory.mktemp("lifecycle"), request.param)
    yield process, clock
    process.stop()


def _retention(process: ServerProcess, days: int | None) -> None:
    policy = RetentionPolicy(enabled=days is not None, days=days)
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=policy)
    time.sleep(1.2)  # the service reads the policy again after a second at most


@pytest.fixture
def kept(lake: tuple[ServerProcess, Clock]) -> Iterator[FileSystemClient]:
    """A file system of an account that keeps deleted paths for 2 days."""
    _retention(lake[0], 2)
    service = DataLakeServiceClient.from_connection_string(lake[0].connection_string)
    client = service.create_file_system("fs" + uuid.uuid4().hex[:12])
    yield client
    client.delete_file_system()
    _retention(lake[0], None)


@pytest.fixture
def flat_delete(lake: tuple[ServerProcess, Clock]) -> Iterator[FileSystemClient]:
    """A file system of an account that keeps nothing deleted."""
    service = DataLakeServiceClient.from_connection_string(lake[0].connection_string)
    client = service.create_file_system("fs" + uuid.uuid4().hex[:12])
    yield client
    client.delete_file_system()


def _paths(fs: FileSystemClient) -> list[str]:
    return [p.name for p in fs.get_paths(recursive=True)]


def _wait_for(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


# ------------------------------------------------------------------ soft delete


def test_deleted_paths_are_listed_as_azure_lists_them(kept: FileSystemClient) -> None:
    """The SDK's live ``test_get_deleted_paths``: six deletions, by prefix, and in pages."""
    file0, file1 = kept.create_file("file0"), kept.create_file("file1")
    dir1, dir2 = kept.create_directory("dir1"), kept.create_directory("dir2")
    dir3 = kept.create_directory("dir3")
    in_dir3 = dir3.create_file("file_in_dir3")
    in_subdir = dir3.create_file("subdir/file_in_subdir")
    for client in (file0, file1):
        client.delete_file()
    for directory in (dir1, dir2):
        directory.delete_directory()
    in_dir3.delete_file()
    in_subdir.delete_file()
    deleted = list(kept.list_deleted_paths())
    assert [p.name for p in deleted] == [
        "dir1", "dir2", "dir3/file_in_dir3", "dir3/subdir/file_in_subdir", "file0", "file1",
    ]  # fmt: skip
    assert all(p.deletion_id and p.deletion_id.isdigit() and len(p.deletion_id) == 18 for p in deleted)
    # whole days left after the current one: 1 of 2 (Azure lists 6 of 7 for paths deleted just now)
    assert all(p.remaining_retention_days == 1 and p.deleted_time is not None for p in deleted)
    under = list(kept.list_deleted_paths(path_prefix="dir3/"))
    assert [p.name for p in under] == ["dir3/file_in_dir3", "dir3/subdir/file_in_subdir"]
    pages = kept.list_deleted_paths(results_per_page=2).by_page()
    first = list(next(pages))
    rest = list(
        next(kept.list_deleted_paths(results_per_page=4).by_page(continuation_token=pages.continuation_token))
    )
    assert [p.name for p in first] == ["dir1", "dir2"] and len(rest) == 4
    assert _paths(kept) == ["dir3", "dir3/subdir"]


def test_undelete_restores_a_directory_with_its_tree(kept: FileSystemClient) -> None:
    directory = kept.create_directory("tree")
    directory.create_file("a/one").upload_data(b"one", overwrite=True)
    directory.create_file("two").upload_data(b"two", overwrite=True)
    directory.set_access_control(permissions="rwxr-x--x")
    response = directory.delete_directory()
    assert response["deletion_id"].isdigit()
    assert _paths(kept) == []
    with pytest.raises(ResourceNotFoundError):
        kept.get_file_client("tree/two").download_file()
    assert [p.name for p in kept.list_deleted_paths()] == ["tree"]  # the tree is one deletion
    restored = kept._undelete_path("tree", response["deletion_id"])
    assert restored.get_directory_properties().name == "tree"
    assert _paths(kept) == ["tree", "tree/a", "tree/a/one", "tree/two"]
    assert kept.get_file_client("tree/a/one").download_file().readall() == b"one"
    assert directory.get_access_control()["permissions"] == "rwxr-x--x"
    assert list(kept.list_deleted_paths()) == []


def test_undelete_blob_restores_a_directory_with_its_tree(
    kept: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    """Undelete Blob of a deleted directory (the Blob API's restore, as Storage Explorer and the
    Blob SDK call it) brings back what Undelete Path does: the directory and its tree."""
    directory = kept.create_directory("blobtree")
    directory.create_file("a/one").upload_data(b"one", overwrite=True)
    directory.create_file("two").upload_data(b"two", overwrite=True)
    directory.delete_directory()
    assert _paths(kept) == []
    with BlobServiceClient.from_connection_string(lake[0].connection_string) as blobs:
        container = blobs.get_container_client(kept.file_system_name)
        container.get_blob_client("blobtree").undelete_blob()
        assert _paths(kept) == ["blobtree", "blobtree/a", "blobtree/a/one", "blobtree/two"]
        assert container.get_blob_client("blobtree/a/one").download_blob().readall() == b"one"
        assert list(kept.list_deleted_paths()) == []
        with pytest.raises(ResourceNotFoundError):  # nothing kept: Undelete Blob's 404
            container.get_blob_client("nothing").undelete_blob()


def test_undelete_blob_of_a_directory_async(
    kept: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

    kept.create_directory("adir").create_file("b/c").upload_data(b"c", overwrite=True)
    kept.get_directory_client("adir").delete_directory()

    async def scenario() -> None:
        async with AsyncBlobServiceClient.from_connection_string(lake[0].connection_string) as blobs:
            await blobs.get_blob_client(kept.file_system_name, "adir").undelete_blob()

    asyncio.run(scenario())
    assert _paths(kept) == ["adir", "adir/b", "adir/b/c"]


def test_undelete_a_file_by_its_deletion_id(kept: FileSystemClient) -> None:
    """The SDK's live ``test_undelete_file_with_version_id``: the id Delete File answers (on the
    Blob port, the Blob API's Delete Blob) restores it; twice is 404, over a live path 409."""
    file = kept.create_file("dir10/file")
    file.upload_data(b"data", overwrite=True)
    response = file.delete_file()
    with pytest.raises(HttpResponseError):
        kept.get_file_client("dir10/file").get_file_properties()
    restored = kept._undelete_path("dir10/file", response["deletion_id"])
    assert restored.download_file().readall() == b"data"
    with pytest.raises(ResourceNotFoundError):
        kept._undelete_path("dir10/file", response["deletion_id"])
    second = file.delete_file()
    kept.create_file("dir10/file")
    with pytest.raises(HttpResponseError) as refused:
        kept._undelete_path("dir10/file", second["deletion_id"])
    assert refused.value.status_code == 409


def test_undelete_bad_sources_are_refused(kept: FileSystemClient, lake: tuple[ServerProcess, Clock]) -> None:
    http = BlobHttp(lake[0].blob_port)
    name = kept.file_system_name
    bad = http.request("PUT", f"/{name}/x?comp=undelete", {"x-ms-undelete-source": "x?deletionid=abc"})
    assert bad.status == 400 and bad.code == "InvalidHeaderValue"
    missing = http.request("PUT", f"/{name}/x?comp=undelete", {"x-ms-undelete-source": "x"})
    assert missing.status == 400 and missing.code == "InvalidHeaderValue"
    other = http.request(
        "PUT", f"/{name}/x?comp=undelete", {"x-ms-undelete-source": "y?deletionid=133836969737291364"}
    )
    assert other.status == 400 and other.code == "InvalidHeaderValue"
    unknown = http.request(
        "PUT", f"/{name}/x?comp=undelete", {"x-ms-undelete-source": "x?deletionid=133836969737291364"}
    )
    # Undelete Path is the Blob API's operation on the Blob endpoint: its errors are Blob errors
    # (FileSystemClientTests/UndeletePathAsync_Error of the .NET SDK: XML ContainerNotFound).
    assert unknown.status == 404 and unknown.code == "BlobNotFound"
    assert unknown.headers["content-type"] == "application/xml"


def test_undelete_source_without_a_path_restores_the_request_path(
    kept: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    """The .NET SDK's ``x-ms-undelete-source`` is the query alone, ``?deletionid={id}``: Azure
    restores the path of the request's URL (its recording UndeletePathAsync: 200 with
    ``x-ms-resource-type: directory``, x-ms-version 2021-06-08)."""
    kept.create_directory("net-dir")
    deletion = kept.get_directory_client("net-dir").delete_directory()["deletion_id"]
    http = BlobHttp(lake[0].blob_port)
    headers = {
        "Accept": "application/json",
        "x-ms-version": "2021-06-08",
        "x-ms-undelete-source": f"?deletionid={deletion}",
    }
    restored = http.request("PUT", f"/{kept.file_system_name}/net-dir?comp=undelete", headers)
    assert restored.status == 200, restored
    assert restored.headers["x-ms-resource-type"] == "directory"
    assert "x-ms-creation-time" in restored.headers
    assert kept.get_directory_client("net-dir").exists()
    gone = http.request("PUT", f"/missing{uuid.uuid4().hex[:8]}/net-dir?comp=undelete", headers)
    assert (gone.status, gone.code) == (404, "ContainerNotFound"), gone
    assert gone.headers["content-type"] == "application/xml"
    assert gone.body.startswith(
        b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><Error><Code>ContainerNotFound</Code>'
    )


def test_a_directory_emptied_by_soft_deletes_is_empty(
    kept: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    """What a soft delete keeps below a directory is no child of it: the directory deletes
    without ``recursive``, and the kept file can still be restored (its parent made again)."""
    kept.create_directory("emptied")
    deletion = kept.create_file("emptied/file").delete_file()["deletion_id"]
    http = BlobHttp(lake[0].blob_port)
    reply = http.request("DELETE", f"/{kept.file_system_name}/emptied?recursive=false")
    assert reply.status == 200, reply.body
    assert _paths(kept) == []
    kept._undelete_path("emptied/file", deletion)
    assert _paths(kept) == ["emptied", "emptied/file"]


def test_deleted_tree_is_purged_after_its_retention(
    kept: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    directory = kept.create_directory("old")
    directory.create_file("inner/file").upload_data(b"x" * 100, overwrite=True)
    deletion = directory.delete_directory()["deletion_id"]
    blobs = BlobServiceClient.from_connection_string(lake[0].connection_string)
    container = blobs.get_container_client(kept.file_system_name)
    assert len(list(container.list_blobs(include=["deleted"]))) == 3  # the tree, kept
    lake[1].advance(3 * DAY)
    assert list(kept.list_deleted_paths()) == []
    _wait_for(lambda: list(container.list_blobs(include=["deleted"])) == [])
    with pytest.raises(ResourceNotFoundError):
        kept._undelete_path("old", deletion)


def test_soft_delete_and_undelete_async(lake: tuple[ServerProcess, Clock]) -> None:
    _retention(lake[0], 2)

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake[0].connection_string) as service:
            fs = await service.create_file_system("fs" + uuid.uuid4().hex[:12])
            directory = await fs.create_directory("a")
            await directory.create_file("b")
            deletion = (await directory.delete_directory())["deletion_id"]
            listed = [(p.name, p.remaining_retention_days) async for p in fs.list_deleted_paths()]
            assert listed == [("a", 1)]
            restored = await fs._undelete_path("a", deletion)
            assert (await restored.get_directory_properties()).name == "a"
            assert [p.name async for p in fs.get_paths(recursive=True)] == ["a", "a/b"]
            await fs.delete_file_system()

    try:
        asyncio.run(scenario())
    finally:
        _retention(lake[0], None)


# ------------------------------------------------------------------ expiry


def test_expired_file_is_gone_then_swept(
    flat_delete: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    file = flat_delete.create_file("soon")
    file.upload_data(b"short-lived", overwrite=True)
    later = flat_delete.create_file("later")
    later.set_file_expiry("RelativeToNow", expires_on=3_600_000)
    file.set_file_expiry("RelativeToNow", expires_on=1500)
    assert file.download_file().readall() == b"short-lived"
    time.sleep(2.0)
    with pytest.raises(ResourceNotFoundError):
        file.download_file()
    with pytest.raises(ResourceNotFoundError):
        file.get_file_properties()
    assert _paths(flat_delete) == ["later"]
    http = BlobHttp(lake[0].blob_port)
    raw = http.request("HEAD", f"/{flat_delete.file_system_name}/soon?action=getStatus")
    assert raw.status == 404
    blobs = BlobServiceClient.from_connection_string(lake[0].connection_string)
    container = blobs.get_container_client(flat_delete.file_system_name)
    _wait_for(lambda: [b.name for b in container.list_blobs()] == ["later"])


def test_expiry_in_the_future_keeps_the_file(flat_delete: FileSystemClient) -> None:
    file = flat_delete.create_file("kept")
    expires = datetime.now(UTC) + timedelta(hours=1)
    file.set_file_expiry("Absolute", expires_on=expires)
    assert file.get_file_properties().expiry_time is not None
    time.sleep(1.5)  # a sweep or two pass
    assert _paths(flat_delete) == ["kept"]


# ------------------------------------------------------------------ a large recursive delete


def _tree(fs: FileSystemClient, files: int) -> None:
    directory = fs.create_directory("big")
    for index in range(files):
        directory.create_file(f"d{index % 3}/f{index:03d}")


def test_recursive_delete_answers_a_continuation(
    flat_delete: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    """Raw HTTP: each request removes at most a batch of descendants, the deepest names last in
    name order first, so what remains is always a tree; the last one removes the directory."""
    _tree(flat_delete, 20)  # 20 files and 3 directories below big
    http = BlobHttp(lake[0].blob_port)
    name = flat_delete.file_system_name
    first = http.request("DELETE", f"/{name}/big?recursive=true")
    assert first.status == 200
    token = first.headers.get("x-ms-continuation")
    assert token
    remaining = _paths(flat_delete)
    assert len(remaining) == 24 - BATCH and "big" in remaining
    assert all(path.rpartition("/")[0] in ("", *remaining) for path in remaining)  # still a tree
    wrong = http.request("DELETE", f"/{name}/big?recursive=true&continuation=bm90LWl0")
    assert wrong.status == 400
    rounds = 1
    while token:
        reply = http.request("DELETE", f"/{name}/big?recursive=true&continuation={token}")
        assert reply.status == 200
        token = reply.headers.get("x-ms-continuation")
        rounds += 1
        assert rounds < 20
    assert rounds == 4 and _paths(flat_delete) == []


def test_sdk_follows_the_delete_continuation(flat_delete: FileSystemClient) -> None:
    _tree(flat_delete, 30)
    flat_delete.get_directory_client("big").delete_directory()
    assert _paths(flat_delete) == []


def test_sdk_follows_the_delete_continuation_async(lake: tuple[ServerProcess, Clock]) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake[0].connection_string) as service:
            fs = await service.create_file_system("fs" + uuid.uuid4().hex[:12])
            directory = await fs.create_directory("big")
            for index in range(15):
                await directory.create_file(f"x{index}")
            await directory.delete_directory()
            assert [p.name async for p in fs.get_paths(recursive=True)] == []
            await fs.delete_file_system()

    asyncio.run(scenario())


def test_listing_json_survives_continuation(
    flat_delete: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    """A directory of fewer descendants than a batch goes in one request, with no continuation."""
    directory = flat_delete.create_directory("small")
    directory.create_file("one")
    http = BlobHttp(lake[0].blob_port)
    reply = http.request("DELETE", f"/{flat_delete.file_system_name}/small?recursive=true")
    assert reply.status == 200 and "x-ms-continuation" not in reply.headers
    missing = http.request("DELETE", f"/{flat_delete.file_system_name}/small?recursive=true")
    assert missing.status == 404 and orjson.loads(missing.body)["error"]["code"] == "PathNotFound"


# ------------------------------------------------------------------ the root directory


def test_root_directory_access_control(
    flat_delete: FileSystemClient, lake: tuple[ServerProcess, Clock]
) -> None:
    """``get_directory_client("/")``: the root's owner, group, permissions and default ACL are
    set and read back, and new top-level paths inherit its default ACL."""
    root = flat_delete._get_root_directory_client()
    before = root.get_access_control()
    assert before["permissions"] == "rwxr-x---" and before["owner"] == "$superuser"
    root.set_access_control(owner="alice", group="team", permissions="rwxrwx--x")
    after = root.get_access_control()
    assert (after["owner"], after["group"], after["permissions"]) == ("alice", "team", "rwxrwx--x")
    root.set_access_control(
        acl="user::rwx,group::r-x,other::---,default:user::rwx,default:group::r-x,default:other::---,default:user:bob:r-x"
    )
    assert "default:user:bob:r-x" in root.get_access_control()["acl"]
    child = flat_delete.create_directory("child")
    assert "user:bob:r-x" in child.get_access_control()["acl"]
    nested = flat_delete.create_file("made/with/parents")
    assert "default:user:bob:r-x" in flat_delete.get_directory_client("made").get_access_control()["acl"]
    assert "user:bob:r-x" in nested.get_access_control()["acl"]
    root.update_access_control_recursive(acl="user:carol:r-x")
    assert "user:carol:r-x" in root.get_access_control()["acl"]
    assert "user:carol:r-x" in nested.get_access_control()["acl"]
    http = BlobHttp(lake[0].blob_port)
    bad = http.request(
        "PATCH",
        f"/{flat_delete.file_system_name}//?action=setAccessControl",
        {"x-ms-permissions": "rwxzzz---"},
    )
    assert bad.status == 400
    assert root.get_access_control()["owner"] == "alice"
