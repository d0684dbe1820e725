"""Requests the Java SDK (``azure-storage-file-datalake``) sends, answered as its recordings of
real Azure show (``Azure/azure-sdk-assets``,
``java/sdk/storage/azure-storage-file-datalake/src/test/resources/session-records/``).

* ``FileApiTest.getPropertiesDefault.json`` (x-ms-version 2023-01-03) and
  ``FileApiTest.renameSasToken.json`` (2023-08-03, the HEAD through a file system SAS after the
  rename): Get Blob Properties of a file on an HNS account answers ``x-ms-owner``,
  ``x-ms-group``, ``x-ms-permissions`` and ``x-ms-resource-type`` but no ``x-ms-acl``. The header
  came with version 2023-11-03 (Learn, "Version 2023-11-03": Get Blob Properties and Get Blob
  answer it for HNS accounts); the .NET SDK's ``FileClientTests/GetPropertiesAsync.json`` shows
  it at 2024-08-04.

Raw HTTP (the SDKs send versions past 2023-11-03).
"""

from __future__ import annotations

import pytest
from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess


@pytest.mark.parametrize(
    ("version", "has_acl"),
    [("2023-01-03", False), ("2023-08-03", False), ("2023-11-03", True), ("2024-08-04", True)],
)
@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_blob_reads_answer_the_acl_from_2023_11_03(
    fs: FileSystemClient, lake: ServerProcess, method: str, version: str, has_acl: bool
) -> None:
    fs.create_file("file.bin")
    answer = BlobHttp(lake.blob_port).request(
        method, f"/{fs.file_system_name}/file.bin", {"x-ms-version": version, "Accept": "application/xml"}
    )
    assert answer.status == 200, answer
    assert answer.headers["x-ms-resource-type"] == "file"
    assert (answer.headers["x-ms-owner"], answer.headers["x-ms-group"]) == ("$superuser", "$superuser")
    assert answer.headers["x-ms-permissions"] == "rw-r-----"
    if has_acl:
        assert answer.headers["x-ms-acl"] == "user::rw-,group::r--,other::---"
    else:
        assert "x-ms-acl" not in answer.headers


def test_directory_properties_follow_the_same_version(fs: FileSystemClient, lake: ServerProcess) -> None:
    fs.create_directory("dir")
    http = BlobHttp(lake.blob_port)
    old = http.request("HEAD", f"/{fs.file_system_name}/dir", {"x-ms-version": "2023-08-03"})
    new = http.request("HEAD", f"/{fs.file_system_name}/dir", {"x-ms-version": "2023-11-03"})
    assert old.headers["x-ms-resource-type"] == new.headers["x-ms-resource-type"] == "directory"
    assert "x-ms-acl" not in old.headers
    assert new.headers["x-ms-acl"] == "user::rwx,group::r-x,other::---"


def test_sdk_reads_the_acl(fs: FileSystemClient) -> None:
    """The Python SDK sends a version past 2023-11-03 and still finds the ACL in the properties."""
    file = fs.create_file("sdk.bin")
    file.set_access_control(acl="user::rwx,group::r--,other::---")
    properties = file.get_file_properties()
    assert properties.permissions == "rwxr-----"
    assert properties.acl == "user::rwx,group::r--,other::---"
