"""Changing a path's owner, group, permissions or ACL leaves its ETag and Last-Modified as they
were, and Set Access Control answers ``x-ms-namespace-enabled: true``: so Azure does, recorded
for azure-storage-file-datalake's test_set_access_control and test_set_access_control_with_acl
(the ETag of the create, answered by the set and read back by Get Access Control) and
test_set_access_control_recursive (the directory's ETag and Last-Modified of its create, after
its subtree was made and its ACL set recursively). SDK sync and aio, and raw HTTP."""

from __future__ import annotations

import asyncio
import time

from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

ACL = "user::rwx,group::r-x,other::rwx"


def test_set_access_control_keeps_the_etag(fs: FileSystemClient) -> None:
    directory = fs.create_directory("d")
    created = directory.get_directory_properties()
    time.sleep(1.1)  # a new Last-Modified would differ by at least a second
    answered = directory.set_access_control(permissions="0777")
    assert answered["etag"] == created.etag and answered["last_modified"] == created.last_modified
    directory.set_access_control(acl=ACL)
    directory.set_access_control(owner="alice", group="staff")
    control = directory.get_access_control()
    assert (control["acl"], control["owner"], control["group"]) == (ACL, "alice", "staff")
    after = directory.get_directory_properties()
    assert (after.etag, after.last_modified) == (created.etag, created.last_modified)

    file = fs.create_file("f.txt")
    file.upload_data(b"abc", overwrite=True)
    written = file.get_file_properties()
    file.set_access_control(permissions="0640")
    assert file.get_file_properties().etag == written.etag


def test_recursive_changes_keep_the_etags(fs: FileSystemClient) -> None:
    directory = fs.create_directory("top")
    for name in ("top/a/1.txt", "top/a/2.txt", "top/b.txt"):
        fs.create_file(name)
    names = ["top", "top/a", "top/a/1.txt", "top/a/2.txt", "top/b.txt"]
    before = {name: fs.get_file_client(name).get_file_properties() for name in names}
    time.sleep(1.1)
    summary = directory.set_access_control_recursive(acl=ACL)
    assert (summary.counters.directories_successful, summary.counters.files_successful) == (2, 3)
    assert directory.get_access_control()["acl"] == ACL
    directory.update_access_control_recursive(acl="user:1234:r-x")
    directory.remove_access_control_recursive(acl="user:1234")
    for name in names:
        now = fs.get_file_client(name).get_file_properties()
        assert (now.etag, now.last_modified) == (before[name].etag, before[name].last_modified), name
    assert "user:1234" not in directory.get_access_control()["acl"]


def test_aio_set_access_control(fs: FileSystemClient, lake: ServerProcess) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            directory = await service.get_file_system_client(fs.file_system_name).create_directory("aio")
            created = await directory.get_directory_properties()
            answered = await directory.set_access_control(acl=ACL)
            assert answered["etag"] == created.etag
            control = await directory.get_access_control()
            assert control["acl"] == ACL
            assert (await directory.get_directory_properties()).etag == created.etag

    asyncio.run(scenario())


def test_raw_set_access_control_answers_namespace_enabled(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    name = fs.file_system_name
    created = http.request("PUT", f"/{name}/raw?resource=directory")
    answered = http.request("PATCH", f"/{name}/raw?action=setAccessControl", {"x-ms-permissions": "0777"})
    assert answered.status == 200
    assert answered.headers["x-ms-namespace-enabled"] == "true"
    assert answered.headers["etag"] == created.headers["etag"]
    root = http.request("PATCH", f"/{name}?action=setAccessControl", {"x-ms-permissions": "0750"})
    assert root.status == 200 and root.headers["x-ms-namespace-enabled"] == "true"
    read = http.request("HEAD", f"/{name}/raw?action=getAccessControl")
    assert read.headers["etag"] == created.headers["etag"]
    assert read.headers["x-ms-permissions"] == "rwxrwxrwx"


def test_an_empty_acl_header_leaves_the_acl(fs: FileSystemClient, lake: ServerProcess) -> None:
    """``x-ms-acl`` sent empty with a new owner (the JS SDK's ``setAccessControl([], {owner})``)
    changes the owner and leaves the ACL, as Azure answers (recorded for the JS SDK's
    "generateDataLakeSASQueryParameters for file should work for permissions m, e, o, p")."""
    file = fs.create_file("owned.txt")
    before = file.get_access_control()["acl"]
    owner = "b77d5205-ddb5-42e1-80ee-26c74a5e9333"
    path = f"/{fs.file_system_name}/owned.txt?action=setAccessControl"
    answer = BlobHttp(lake.blob_port).request("PATCH", path, {"x-ms-acl": "", "x-ms-owner": owner})
    assert answer.status == 200, answer.body
    control = file.get_access_control()
    assert (control["owner"], control["acl"]) == (owner, before)
