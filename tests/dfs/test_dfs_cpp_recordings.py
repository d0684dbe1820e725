"""Requests the C++ SDK (``azure-storage-files-datalake``) sends, answered as its recordings of
real Azure show (``Azure/azure-sdk-assets``,
``cpp/sdk/storage/azure-storage-files-datalake/test/ut/recordings/``), over raw HTTP as sent.

* ``DataLakeFileClientTest.FlushFileWithLease.json`` (Blob x-ms-version 2021-12-02): the Blob
  API's HEAD of a file has ``x-ms-owner``, ``x-ms-group`` and ``x-ms-permissions`` but no
  ``x-ms-acl``.
* ``DataLakePathClientTest.GetPropertiesAccessControlList.json`` (2023-11-03): the same HEAD has
  ``x-ms-acl: user::rw-,group::r--,other::---`` ("Version 2023-11-03" added it).
"""

from __future__ import annotations

from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

DFS = {"x-ms-version": "2021-06-08"}


def test_blob_properties_answer_the_acl_from_2023_11_03(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/file"
    assert http.request("PUT", f"{path}?resource=file", DFS).status == 201
    for version, acl in (("2023-08-03", None), ("2023-11-03", "user::rw-,group::r--,other::---")):
        for method in ("HEAD", "GET"):
            answer = http.request(method, path, {"x-ms-version": version})
            assert answer.status == 200
            assert answer.headers.get("x-ms-acl") == acl, (method, version)
            assert answer.headers["x-ms-permissions"] == "rw-r-----"
