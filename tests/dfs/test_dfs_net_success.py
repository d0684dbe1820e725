"""Successful DFS answers as Azure gave them to the .NET SDK (``Azure/azure-sdk-assets``,
``net/sdk/storage/Azure.Storage.Files.DataLake/tests/SessionRecords/``, x-ms-version 2024-08-04).

* ``DirectoryClientTests/SetAccessControlRecursiveAsync.json``: Set Access Control Recursive is
  200 with ``x-ms-namespace-enabled: true`` and the JSON counts followed by a line break, and no
  ``Content-Type`` at all (so also the JS SDK's recordings of 2019-12-12 and 2020-02-10). The SDKs
  read a body without a type as JSON; the SDK (sync and aio) still gets its counts.
* ``FileSystemClientTests/GetDeletedPathsAsync.json`` (x-ms-version 2021-06-08; the JS SDK's
  recordings of listDeletedPaths at 2020-06-12 and 2023-08-03 agree): each soft-deleted path's
  ``<Properties>`` are Creation-Time, Last-Modified, ``Expiry-Time`` (the deletion time plus the
  retention), Etag, (ResourceType, from 2023-08-03), Content-Length, Content-Type, the empty
  Content-Encoding and -Language, ``<Content-CRC64>AAAAAAAAAAA=</Content-CRC64>`` for a path of
  no content, empty Content-MD5, Cache-Control and Content-Disposition, BlobType, ``AccessTier``
  Hot, ``AccessTierInferred`` true, ServerEncrypted, DeletedTime, RemainingRetentionDays.

SDK and raw HTTP against ``tabulae serve --hns``.
"""

from __future__ import annotations

import asyncio
import json
import time
from email.utils import parsedate_to_datetime
from xml.etree import ElementTree

from azure.storage.blob import BlobServiceClient, RetentionPolicy
from azure.storage.filedatalake import FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

NET = {"Accept": "application/json", "x-ms-version": "2024-08-04"}
ACL = "user::rwx,group::r--,other::---,mask::rwx"


def _tree(fs: FileSystemClient) -> None:
    fs.create_directory("top")
    fs.create_directory("top/sub")
    fs.create_file("top/sub/a.txt")
    fs.create_file("top/b.txt")


def test_set_access_control_recursive_has_no_content_type(fs: FileSystemClient, lake: ServerProcess) -> None:
    _tree(fs)
    answer = BlobHttp(lake.blob_port).request(
        "PATCH",
        f"/{fs.file_system_name}/top?action=setAccessControlRecursive&mode=set",
        {"x-ms-acl": ACL, **NET},
    )
    assert answer.status == 200, answer
    assert "content-type" not in answer.headers
    assert answer.headers["x-ms-namespace-enabled"] == "true"
    assert answer.body == (
        b'{"directoriesSuccessful":2,"failedEntries":[],"failureCount":0,"filesSuccessful":2}\n'
    )
    assert json.loads(answer.body)["filesSuccessful"] == 2


def test_the_sdk_reads_the_counts(fs: FileSystemClient) -> None:
    _tree(fs)
    result = fs.get_directory_client("top").set_access_control_recursive(acl=ACL)
    counts = result.counters
    assert counts is not None
    assert (counts.directories_successful, counts.files_successful, counts.failure_count) == (2, 2, 0)
    assert "mask::rwx" in fs.get_file_client("top/b.txt").get_access_control()["acl"]


def test_the_async_sdk_reads_the_counts_in_batches(fs: FileSystemClient, lake: ServerProcess) -> None:
    _tree(fs)

    async def run() -> tuple[int, int, int]:
        async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
            directory = service.get_directory_client(fs.file_system_name, "top")
            result = await directory.update_access_control_recursive(acl="user::rwx", batch_size=1)
            counts = result.counters
            assert counts is not None
            return counts.directories_successful, counts.files_successful, counts.failure_count

    assert asyncio.run(run()) == (2, 2, 0)


DELETED_PROPERTIES = [
    "Creation-Time", "Last-Modified", "Expiry-Time", "Etag", "ResourceType", "Content-Length",
    "Content-Type", "Content-Encoding", "Content-Language", "Content-CRC64", "Content-MD5",
    "Cache-Control", "Content-Disposition", "BlobType", "AccessTier", "AccessTierInferred",
    "ServerEncrypted", "DeletedTime", "RemainingRetentionDays",
]  # fmt: skip


def _retention(lake: ServerProcess, days: int | None) -> None:
    with BlobServiceClient.from_connection_string(lake.connection_string) as blobs:
        blobs.set_service_properties(
            delete_retention_policy=RetentionPolicy(enabled=days is not None, days=days)
        )
    time.sleep(1.2)  # the service reads the policy again after a second at most


def test_deleted_paths_list_their_properties_as_azure_does(fs: FileSystemClient, lake: ServerProcess) -> None:
    _retention(lake, 7)
    try:
        fs.create_directory("gone-dir").delete_directory()
        fs.create_file("gone-file").delete_file()
        answer = BlobHttp(lake.blob_port).request(
            "GET",
            f"/{fs.file_system_name}?restype=container&comp=list&showonly=deleted",
            {"Accept": "application/xml", "x-ms-version": "2021-06-08"},
        )
        assert answer.status == 200, answer
        root = ElementTree.fromstring(answer.body.decode("utf-8-sig"))
        blobs = root.findall("Blobs/Blob")
        assert [b.findtext("Name") for b in blobs] == ["gone-dir", "gone-file"]
        for blob, kind in zip(blobs, ("directory", "file"), strict=True):
            assert [child.tag for child in blob] == [
                "Name",
                "DeletionId",
                "Deleted",
                "Properties",
                "OrMetadata",
            ]
            properties = blob.find("Properties")
            assert properties is not None
            assert [child.tag for child in properties] == DELETED_PROPERTIES
            values = {child.tag: child.text for child in properties}
            assert values["ResourceType"] == kind
            assert values["Content-CRC64"] == "AAAAAAAAAAA="
            assert (values["AccessTier"], values["AccessTierInferred"]) == ("Hot", "true")
            assert values["Content-Encoding"] is None and values["Content-MD5"] is None
            expiry = parsedate_to_datetime(values["Expiry-Time"] or "")
            deleted = parsedate_to_datetime(values["DeletedTime"] or "")
            assert (expiry - deleted).total_seconds() == 7 * 86_400
            assert values["RemainingRetentionDays"] == "6"
        listed = [(p.name, p.remaining_retention_days) for p in fs.list_deleted_paths()]
        assert listed == [("gone-dir", 6), ("gone-file", 6)]

        async def listed_async() -> list[tuple[str | None, int | None]]:
            async with AsyncDataLakeServiceClient.from_connection_string(lake.connection_string) as service:
                client = service.get_file_system_client(fs.file_system_name)
                return [(p.name, p.remaining_retention_days) async for p in client.list_deleted_paths()]

        assert asyncio.run(listed_async()) == listed
    finally:
        _retention(lake, None)
