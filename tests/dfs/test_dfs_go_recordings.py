"""Requests the Go SDK (``azdatalake``) sends to the DFS endpoint, answered as its recordings of
real Azure show (``Azure/azure-sdk-assets``, ``go/sdk/storage/azdatalake/testdata/recordings/
Test/``). Raw HTTP, so the bytes are the ones compared.

* ``TestCreateDirWithPathTooDeep.json`` (x-ms-version 2026-02-06): directories ``seg1`` to
  ``seg60`` are created one below the other; ``seg61`` is 409 ``PathIsTooDeep``, "This operation
  is not permitted as the path is too deep." (186 bytes with Azure's request id and time, as ours).
* ``TestCreateFileWithExpiryRelativeToCreation.json`` (x-ms-version 2020-10-02): Create Path of a
  file with ``x-ms-expiry-option: RelativeToCreation`` is 400 ``InvalidHeaderValue``, code and
  message only (no header named). The other options are taken (``TestCreateFileWithExpiry*``).
* ``TestDirSetAccessControlRecursiveWithBadContinuation.json`` (x-ms-version 2023-08-03): Set
  Access Control Recursive with ``continuation=garbage`` is 200,
  ``{"directoriesSuccessful":0,"failedEntries":[],"failureCount":0,"filesSuccessful":0}``, no
  ``x-ms-continuation``: nothing is changed.
* ``TestDirGetPathProperties.json`` (x-ms-version 2025-07-05): ``HEAD <dir>?action=getStatus``,
  with or without ``If-Match``, answers the system properties only: ETag, Last-Modified,
  ``x-ms-creation-time``, ``x-ms-owner``, ``x-ms-group``, ``x-ms-permissions``,
  ``x-ms-resource-type``, ``x-ms-server-encrypted`` (no ACL, metadata, content headers, lease or
  tier, as Get Properties has).
"""

from __future__ import annotations

import json

from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

GO_HEADERS = {"Accept": "application/json", "x-ms-version": "2026-02-06"}


def test_a_directory_sixty_one_deep_is_refused(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}"
    for depth in range(1, 61):
        path += f"/seg{depth}"
        created = http.request("PUT", path + "?resource=directory", GO_HEADERS)
        assert created.status == 201, (depth, created)
    refused = http.request("PUT", path + "/seg61?resource=directory", GO_HEADERS)
    assert (refused.status, refused.code) == (409, "PathIsTooDeep"), refused
    assert refused.headers["content-type"] == "application/json; charset=utf-8"
    assert refused.body.decode().startswith(
        '{"error":{"code":"PathIsTooDeep","message":"This operation is not permitted as the path is '
        "too deep.\\nRequestId:"
    ), refused
    assert refused.headers["content-length"] == "186"
    deepest = fs.get_directory_client("/".join(f"seg{depth}" for depth in range(1, 62)))
    assert not deepest.exists()
    assert fs.get_directory_client("/".join(f"seg{depth}" for depth in range(1, 60))).exists()


def test_a_new_file_cannot_expire_relative_to_its_creation(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/file"
    headers = {
        "Accept": "application/json",
        "x-ms-version": "2020-10-02",
        "x-ms-expiry-option": "RelativeToCreation",
        "x-ms-expiry-time": "8000",
    }
    refused = http.request("PUT", path + "?resource=file", headers)
    assert (refused.status, refused.code) == (400, "InvalidHeaderValue"), refused
    assert json.loads(refused.body)["error"].keys() == {"code", "message"}
    assert json.loads(refused.body)["error"]["message"].startswith(
        "The value for one of the HTTP headers is not in the correct format.\nRequestId:"
    )
    assert not fs.get_file_client("file").exists()
    # relative to now is taken, and Set Expiry may then count from the creation time
    headers["x-ms-expiry-option"] = "RelativeToNow"
    assert http.request("PUT", path + "?resource=file", headers).status == 201
    headers["x-ms-expiry-option"] = "RelativeToCreation"
    assert http.request("PUT", path + "?comp=expiry", {**headers, "x-ms-version": "2023-08-03"}).status == 200


def test_a_garbage_continuation_changes_nothing(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    fs.create_directory("dir").create_file("file")
    before = fs.get_directory_client("dir").get_access_control()["acl"]
    headers = {
        "Accept": "application/json",
        "x-ms-version": "2023-08-03",
        "x-ms-acl": "user::rwx,group::r-x,other::rwx",
        "Content-Length": "0",
    }
    query = "?action=setAccessControlRecursive&continuation=garbage&forceFlag=false&mode=set"
    answer = http.request("PATCH", f"/{fs.file_system_name}/dir{query}", headers)
    assert answer.status == 200, answer
    assert json.loads(answer.body) == {
        "directoriesSuccessful": 0,
        "failedEntries": [],
        "failureCount": 0,
        "filesSuccessful": 0,
    }
    assert answer.headers["x-ms-namespace-enabled"] == "true"
    assert "x-ms-continuation" not in answer.headers
    assert fs.get_directory_client("dir").get_access_control()["acl"] == before
    # without it the walk changes the directory and its file
    whole = http.request(
        "PATCH", f"/{fs.file_system_name}/dir{query.replace('&continuation=garbage', '')}", headers
    )
    assert json.loads(whole.body)["directoriesSuccessful"] == 1
    assert json.loads(whole.body)["filesSuccessful"] == 1
    assert fs.get_directory_client("dir").get_access_control()["acl"] == "user::rwx,group::r-x,other::rwx"


STATUS_HEADERS = {
    "etag", "last-modified", "content-length", "x-ms-creation-time", "x-ms-server-encrypted",
    "x-ms-resource-type", "x-ms-owner", "x-ms-group", "x-ms-permissions",
}  # fmt: skip


def test_get_status_answers_the_system_properties_only(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    headers = {"Accept": "application/json", "x-ms-version": "2025-07-05"}
    directory = f"/{fs.file_system_name}/dir"
    created = http.request("PUT", directory + "?resource=directory", headers)
    assert created.status == 201, created
    for extra in ({}, {"If-Match": created.headers["etag"]}):
        status = http.request("HEAD", directory + "?action=getStatus", {**headers, **extra})
        assert status.status == 200, status
        names = {name for name in status.headers if name not in ("date", "server", "x-ms-request-id")}
        assert names - {"x-ms-version"} == STATUS_HEADERS, status.headers
        assert status.headers["etag"] == created.headers["etag"]
        assert (status.headers["x-ms-resource-type"], status.headers["x-ms-permissions"]) == (
            "directory",
            "rwxr-x---",
        )
        assert status.headers["content-length"] == "0"
    # Get Properties keeps its full answer
    full = http.request("HEAD", directory, headers)
    assert "x-ms-acl" in full.headers and "x-ms-lease-state" in full.headers
    refused = http.request("HEAD", directory + "?action=getStatus", {**headers, "If-Match": '"0x1"'})
    assert (refused.status, refused.code) == (412, "ConditionNotMet")
