"""The Data Lake (DFS) API on the Blob port, driven by ``azure-storage-file-datalake`` (sync and
aio) against ``tabulae serve --hns devstoreaccount1`` on every store, with raw HTTP for the bad
inputs the SDK cannot send; one data set with the Blob API."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp, Reply
from tests.serverproc import ServerProcess


def _names(fs: FileSystemClient, path: str | None = None, recursive: bool = True) -> list[tuple[str, bool]]:
    return [(p.name, bool(p.is_directory)) for p in fs.get_paths(path=path, recursive=recursive)]


def _json_error(reply: Reply) -> str:
    body = orjson.loads(reply.body)
    assert body["error"]["code"] == reply.code
    return str(reply.code)


# ------------------------------------------------------------------ file systems


def test_file_systems_are_containers(lake: ServerProcess) -> None:
    service = DataLakeServiceClient.from_connection_string(lake.connection_string)
    name = "fs" + uuid.uuid4().hex[:12]
    fs = service.create_file_system(name, metadata={"team": "lake"})
    assert fs.get_file_system_properties().metadata == {"team": "lake"}
    assert name in [item.name for item in service.list_file_systems()]
    with pytest.raises(ResourceExistsError):
        service.create_file_system(name)
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    assert blobs.get_container_client(name).exists()
    fs.delete_file_system()
    assert not blobs.get_container_client(name).exists()


def test_raw_file_system_operations(lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = "fs" + uuid.uuid4().hex[:12]
    created = http.request("PUT", f"/{name}?resource=filesystem", {"x-ms-properties": "a=Yg=="})
    assert created.status == 201 and created.headers["x-ms-namespace-enabled"] == "true"
    again = http.request("PUT", f"/{name}?resource=filesystem")
    assert again.status == 409 and _json_error(again) == "FilesystemAlreadyExists"
    head = http.request("HEAD", f"/{name}?resource=filesystem")
    assert head.status == 200 and head.headers["x-ms-properties"] == "a=Yg=="
    listed = http.request("GET", "/?resource=account")
    assert listed.status == 200
    assert name in [item["name"] for item in orjson.loads(listed.body)["filesystems"]]
    assert http.request("DELETE", f"/{name}?resource=filesystem").status == 202
    missing = http.request("GET", f"/{name}?resource=filesystem&recursive=true")
    assert missing.status == 404 and _json_error(missing) == "FilesystemNotFound"


# ------------------------------------------------------------------ paths


def test_create_with_parents_and_list(fs: FileSystemClient) -> None:
    fs.create_file("a/b/c.txt")
    fs.create_directory("a/d")
    fs.create_file("top.txt")
    assert _names(fs) == [("a", True), ("a/b", True), ("a/b/c.txt", False), ("a/d", True), ("top.txt", False)]
    assert _names(fs, recursive=False) == [("a", True), ("top.txt", False)]
    assert _names(fs, "a", recursive=False) == [("a/b", True), ("a/d", True)]
    with pytest.raises(ResourceNotFoundError):
        _names(fs, "nowhere")


def test_list_paths_pages(fs: FileSystemClient) -> None:
    for index in range(7):
        fs.create_file(f"dir/f{index}")
    pages = fs.get_paths(max_results=3).by_page()
    sizes = [len(list(page)) for page in pages]
    assert sizes == [3, 3, 2]


def test_append_flush_read(fs: FileSystemClient) -> None:
    file = fs.create_file("data/log.txt")
    file.append_data(b"hello ", 0, 6)
    file.append_data(b"world", 6, 5)
    assert file.get_file_properties().size == 0  # appended, not yet flushed
    file.flush_data(11)
    assert file.download_file().readall() == b"hello world"
    assert file.download_file(offset=6, length=3).readall() == b"wor"
    file.append_data(b"!", 11, 1)
    file.flush_data(12)
    assert file.download_file().readall() == b"hello world!"
    file.upload_data(b"x" * 5000, overwrite=True)
    assert file.download_file().readall() == b"x" * 5000


def test_flush_at_a_wrong_position(fs: FileSystemClient, lake: ServerProcess) -> None:
    file = fs.create_file("f.bin")
    file.append_data(b"abc", 0, 3)
    with pytest.raises(HttpResponseError) as caught:
        file.flush_data(5)
    assert caught.value.error_code == "InvalidFlushPosition"
    file.append_data(b"zz", 7, 2)  # a gap: the flush that needs it is refused
    http = BlobHttp(lake.blob_port)
    reply = http.request("PATCH", f"/{fs.file_system_name}/f.bin?action=flush&position=9")
    assert reply.status == 400 and _json_error(reply) == "InvalidFlushPosition"


def test_a_flush_without_a_key_reports_nothing_encrypted(fs: FileSystemClient, lake: ServerProcess) -> None:
    """Append's content is encrypted as it is stored (``x-ms-request-server-encrypted: true``);
    a Flush carries no content, and Azure answers it ``false`` unless the request names a
    customer-provided key (recorded for azure-storage-file-datalake's test_get_properties and
    test_append_empty_data; with a key, test_file_append_flush_data_cpk says ``true``)."""
    file = fs.create_file("plain.txt")
    assert file.append_data(b"abc", 0, 3)["request_server_encrypted"] is True
    assert file.flush_data(3)["request_server_encrypted"] is False
    assert file.flush_data(3, close=True)["request_server_encrypted"] is False

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            client = service.get_file_client(fs.file_system_name, "plain.txt")
            assert (await client.append_data(b"de", 3, 2))["request_server_encrypted"] is True
            assert (await client.flush_data(5))["request_server_encrypted"] is False

    asyncio.run(scenario())
    assert file.download_file().readall() == b"abcde"


def test_properties_and_metadata(fs: FileSystemClient) -> None:
    file = fs.create_file("p.txt", metadata={"k": "v"})
    properties = file.get_file_properties()
    assert properties.metadata == {"k": "v"}
    file.set_metadata({"other": "1"})
    assert file.get_file_properties().metadata == {"other": "1"}
    directory = fs.create_directory("d")
    assert directory.get_directory_properties().metadata.get("hdi_isfolder") == "true"


def test_rename_directory_moves_its_tree(fs: FileSystemClient) -> None:
    fs.create_file("src/x/1.txt").upload_data(b"one", overwrite=True)
    fs.create_file("src/2.txt").upload_data(b"two", overwrite=True)
    fs.create_directory("dst")
    fs.get_directory_client("src").rename_directory(f"{fs.file_system_name}/dst/moved")
    assert _names(fs) == [
        ("dst", True), ("dst/moved", True), ("dst/moved/2.txt", False), ("dst/moved/x", True),
        ("dst/moved/x/1.txt", False),
    ]  # fmt: skip
    assert fs.get_file_client("dst/moved/x/1.txt").download_file().readall() == b"one"
    fs.get_file_client("dst/moved/2.txt").rename_file(f"{fs.file_system_name}/renamed.txt")
    assert fs.get_file_client("renamed.txt").download_file().readall() == b"two"


def test_rename_errors(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_directory("a/b")
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name

    def rename(source: str, destination: str) -> Reply:
        return http.request(
            "PUT", f"/{name}/{destination}?mode=legacy", {"x-ms-rename-source": f"/{name}/{source}"}
        )

    into_itself = rename("a", "a/b/c")
    assert into_itself.status == 409 and _json_error(into_itself) == "InvalidRenameSourcePath"
    missing = rename("nothing", "x")
    assert missing.status == 404 and _json_error(missing) == "SourcePathNotFound"
    no_parent = rename("a", "no/such/parent")
    assert no_parent.status == 404 and _json_error(no_parent) == "RenameDestinationParentPathNotFound"
    fs.create_file("file.txt")
    mixed = rename("file.txt", "a/b")
    assert mixed.status == 409 and _json_error(mixed) == "InvalidSourceOrDestinationResourceType"
    assert _names(fs) == [("a", True), ("a/b", True), ("file.txt", False)]


def test_delete(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_file("tree/a/1")
    fs.create_file("tree/2")
    http = BlobHttp(lake.blob_port)
    refused = http.request("DELETE", f"/{fs.file_system_name}/tree?recursive=false")
    assert refused.status == 409 and _json_error(refused) == "DirectoryNotEmpty"
    fs.get_file_client("tree/2").delete_file()
    fs.get_directory_client("tree").delete_directory()
    assert _names(fs) == []
    with pytest.raises(ResourceNotFoundError):
        fs.get_directory_client("tree").delete_directory()


def test_access_control(fs: FileSystemClient, lake: ServerProcess) -> None:
    directory = fs.create_directory("secure")
    assert directory.get_access_control()["permissions"] == "rwxr-x---"
    file = fs.create_file("secure/f", permissions="0777", umask="0057")
    assert file.get_access_control()["permissions"] == "rwx-w----"
    file.set_access_control(owner="alice", group="staff", permissions="rwxrwx---")
    control = file.get_access_control()
    assert (control["owner"], control["group"], control["permissions"]) == ("alice", "staff", "rwxrwx---")
    directory.set_access_control(
        acl="user::rwx,user:bob:r-x,group::r-x,other::---,default:user::rwx,default:group::r-x,default:other::---"
    )
    acl = directory.get_access_control()["acl"]
    assert "user:bob:r-x" in acl and "default:user::rwx" in acl and "mask::r-x" in acl
    http = BlobHttp(lake.blob_port)
    bad = http.request(
        "PATCH", f"/{fs.file_system_name}/secure?action=setAccessControl", {"x-ms-permissions": "rwxrwxrwz"}
    )
    assert bad.status == 400 and _json_error(bad) == "InvalidPermission"
    bad_acl = http.request(
        "PATCH", f"/{fs.file_system_name}/secure?action=setAccessControl", {"x-ms-acl": "user::rwx"}
    )
    assert bad_acl.status == 400 and _json_error(bad_acl) == "InvaldAccessControlList"


def test_one_data_set_with_the_blob_api(fs: FileSystemClient, lake: ServerProcess) -> None:
    file = fs.create_file("shared/from-dfs.txt")
    file.upload_data(b"lake bytes", overwrite=True)
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    container = blobs.get_container_client(fs.file_system_name)
    assert container.download_blob("shared/from-dfs.txt").readall() == b"lake bytes"
    listed = {blob.name: blob for blob in container.list_blobs(include=["metadata"])}
    assert listed["shared"].metadata == {"hdi_isfolder": "true"}
    assert listed["shared/from-dfs.txt"].blob_type == "BlockBlob"
    container.upload_blob("shared/from-blob.txt", b"blob bytes")
    assert fs.get_file_client("shared/from-blob.txt").download_file().readall() == b"blob bytes"
    assert fs.get_file_client("shared/from-blob.txt").get_access_control()["owner"] == "$superuser"


def test_async_client(lake: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            fs = await service.create_file_system("fs" + uuid.uuid4().hex[:12])
            file = await fs.create_file("a/b.txt")
            await file.append_data(b"async", 0, 5)
            await file.flush_data(5)
            directory = fs.get_directory_client("a")
            await directory.rename_directory(f"{fs.file_system_name}/c")
            moved = fs.get_file_client("c/b.txt")
            assert await (await moved.download_file()).readall() == b"async"
            assert [p.name async for p in fs.get_paths()] == ["c", "c/b.txt"]
            assert (await moved.get_access_control())["permissions"] == "rw-r-----"
            await fs.get_directory_client("c").delete_directory()
            assert [p.name async for p in fs.get_paths()] == []
            await fs.delete_file_system()

    asyncio.run(scenario())


def test_set_access_control_recursive(fs: FileSystemClient) -> None:
    for name in ("r/a/1", "r/a/2", "r/b/3", "r/4"):
        fs.create_file(name)
    directory = fs.get_directory_client("r")
    result = directory.set_access_control_recursive(
        acl="user::rwx,group::r-x,other::--x,default:user::rwx,default:group::r-x,default:other::---",
        batch_size=2,
    )
    assert (result.counters.directories_successful, result.counters.files_successful) == (3, 4)
    assert result.counters.failure_count == 0 and result.continuation is None
    assert fs.get_file_client("r/a/1").get_access_control()["acl"] == "user::rwx,group::r-x,other::--x"
    assert "default:user::rwx" in fs.get_directory_client("r/b").get_access_control()["acl"]
    changed = directory.update_access_control_recursive(acl="user:bob:r--")
    assert changed.counters.files_successful == 4
    assert "user:bob:r--" in fs.get_file_client("r/4").get_access_control()["acl"]
    removed = directory.remove_access_control_recursive(acl="user:bob,mask,default:user,default:group")
    assert removed.counters.directories_successful == 3
    assert fs.get_file_client("r/4").get_access_control()["acl"] == "user::rwx,group::r-x,other::--x"
    assert "default" not in fs.get_directory_client("r/a").get_access_control()["acl"]


def test_blob_api_writes_make_parents_and_hns_refusals(fs: FileSystemClient, lake: ServerProcess) -> None:
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    container = blobs.get_container_client(fs.file_system_name)
    container.upload_blob("x/y/z.txt", b"via blob")
    assert _names(fs, recursive=False) == [("x", True)]
    assert _names(fs, "x", recursive=False) == [("x/y", True)]
    with pytest.raises(HttpResponseError) as caught:
        container.get_blob_client("pages").create_page_blob(512)
    assert caught.value.error_code == "FeatureNotYetSupportedForHierarchicalNamespaceAccounts"


def test_blob_index_tags_on_an_hns_account(fs: FileSystemClient, lake: ServerProcess) -> None:
    """Real Azure now sets and reads index tags on an HNS account's files (recorded for
    azure-storage-file-datalake 12.26's ``test_data_lake_tags``), conditions included, and
    finds them by tags."""
    blobs = BlobServiceClient.from_connection_string(lake.connection_string)
    container = blobs.get_container_client(fs.file_system_name)
    container.upload_blob("t/made.txt", b"x", tags={"project": "lake"})
    file = fs.create_file("t/set.txt")
    etag = file.get_file_properties().etag
    with pytest.raises(HttpResponseError) as caught:
        file.set_tags({"project": "lake"}, etag="0x1", match_condition=MatchConditions.IfNotModified)
    assert caught.value.status_code == 412
    file.set_tags({"project": "lake", "n": "2"}, etag=etag, match_condition=MatchConditions.IfNotModified)
    assert file.get_tags() == {"project": "lake", "n": "2"}
    assert container.get_blob_client("t/made.txt").get_blob_tags() == {"project": "lake"}
    found = sorted(b.name for b in container.find_blobs_by_tags("\"project\" = 'lake'"))
    assert found == ["t/made.txt", "t/set.txt"]


def test_blob_index_tags_on_an_hns_account_async(fs: FileSystemClient, lake: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            file = service.get_file_system_client(fs.file_system_name).get_file_client("tagged")
            await file.create_file()
            await file.set_tags({"k": "v"})
            assert await file.get_tags() == {"k": "v"}

    asyncio.run(scenario())


def test_a_flat_account_has_no_namespace_operations(server: ServerProcess) -> None:
    """The session's server keeps devstoreaccount1 flat: Get Access Control (how pyarrow, Hadoop
    and Trino tell the two apart) is 400 HierarchicalNamespaceNotEnabled."""
    blobs = BlobServiceClient.from_connection_string(server.connection_string)
    name = "flat" + uuid.uuid4().hex[:10]
    blobs.create_container(name)
    http = BlobHttp(server.blob_port)
    reply = http.request("HEAD", f"/{name}/?action=getAccessControl")
    assert reply.status == 400 and reply.code == "HierarchicalNamespaceNotEnabled"
    blobs.delete_container(name)


def test_expiry(fs: FileSystemClient) -> None:
    file = fs.create_file("soon.txt", expires_on=3_600_000)  # milliseconds from now
    expires = file.get_file_properties().expiry_time
    assert expires is not None
    listed = next(iter(fs.get_paths()))
    assert listed.expiry_time is not None
    file.set_file_expiry("NeverExpire")
    assert file.get_file_properties().expiry_time is None
