"""Requests the C++ SDK (``azure-storage-files-datalake``) sends, answered as its recordings of
real Azure show (``Azure/azure-sdk-assets``,
``cpp/sdk/storage/azure-storage-files-datalake/test/ut/recordings/``), over raw HTTP as sent.

* ``DataLakeFileClientTest.FlushFileWithLease.json`` (DFS x-ms-version 2021-06-08, Blob
  2021-12-02): Append and Flush with ``x-ms-lease-action`` ``acquire``, ``release`` and
  ``acquire-release`` answer no ``x-ms-lease-renewed``; a Flush with ``auto-renew`` a second into
  its 20 s lease answers ``x-ms-lease-renewed: false``. The Blob API's HEAD of the file at
  2021-12-02 has ``x-ms-owner``, ``x-ms-group`` and ``x-ms-permissions`` but no ``x-ms-acl``.
* ``DataLakePathClientTest.GetPropertiesAccessControlList.json`` (2023-11-03): the same HEAD has
  ``x-ms-acl: user::rw-,group::r--,other::---`` ("Version 2023-11-03" added it).
"""

from __future__ import annotations

from azure.storage.filedatalake import FileSystemClient

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess

DFS = {"x-ms-version": "2021-06-08"}


def _acquire(lease: str, action: str = "acquire") -> dict[str, str]:
    return {**DFS, "x-ms-lease-action": action, "x-ms-lease-duration": "20", "x-ms-proposed-lease-id": lease}


def test_flush_lease_actions_answer_as_recorded(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    base = f"/{fs.file_system_name}"
    lease = "001dad37-e190-6e35-0bca-08182fcef0bb"
    for name in ("acquire", "auto_renew", "release", "acquire_release"):
        assert http.request("PUT", f"{base}/{name}?resource=file", DFS).status == 201
    # acquire on Flush
    assert http.request("PATCH", f"{base}/acquire?action=append&position=0", DFS, b"3").status == 202
    flushed = http.request("PATCH", f"{base}/acquire?action=flush&position=1", _acquire(lease))
    assert flushed.status == 200 and "x-ms-lease-renewed" not in flushed.headers
    assert flushed.headers["x-ms-request-server-encrypted"] == "false"
    # acquire on Append, then auto-renew on Flush while the lease holds
    appended = http.request("PATCH", f"{base}/auto_renew?action=append&position=0", _acquire(lease), b"3")
    assert appended.status == 202 and "x-ms-lease-renewed" not in appended.headers
    renew = {**DFS, "x-ms-lease-action": "auto-renew", "x-ms-lease-id": lease}
    renewed = http.request("PATCH", f"{base}/auto_renew?action=flush&position=1", renew)
    assert (renewed.status, renewed.headers.get("x-ms-lease-renewed")) == (200, "false")
    # release on Flush
    other = "fe3194d7-7755-bd8f-9184-c8944d8f66ee"
    assert (
        http.request("PATCH", f"{base}/release?action=append&position=0", _acquire(other), b"3").status == 202
    )
    release = {**DFS, "x-ms-lease-action": "release", "x-ms-lease-id": other}
    released = http.request("PATCH", f"{base}/release?action=flush&position=1", release)
    assert released.status == 200 and "x-ms-lease-renewed" not in released.headers
    # acquire-release on Flush
    assert http.request("PATCH", f"{base}/acquire_release?action=append&position=0", DFS, b"3").status == 202
    both = _acquire("774ac2b9-2578-3864-ffbf-3015f30f510e", "acquire-release")
    done = http.request("PATCH", f"{base}/acquire_release?action=flush&position=1", both)
    assert done.status == 200 and "x-ms-lease-renewed" not in done.headers
    # The Blob API's HEAD of each file, as recorded at 2021-12-02
    for name, state in (("acquire", "leased"), ("auto_renew", "leased"), ("release", "available")):
        head = http.request("HEAD", f"{base}/{name}", {"x-ms-version": "2021-12-02"})
        assert head.headers["x-ms-lease-state"] == state
        assert (head.headers["x-ms-owner"], head.headers["x-ms-group"]) == ("$superuser", "$superuser")
        assert head.headers["x-ms-permissions"] == "rw-r-----"
        assert "x-ms-acl" not in head.headers


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


QUERY = (
    b'<?xml version="1.0" encoding="utf-8"?><QueryRequest><QueryType>SQL</QueryType>'
    b"<Expression>SELECT * FROM BlobStorage;</Expression></QueryRequest>"
)


def test_query_of_a_file_names_its_resource_type_and_no_lease(
    fs: FileSystemClient, lake: ServerProcess
) -> None:
    """Query Blob Contents of a file (DataLakeFileClientTest.QueryBlobAccessConditionLeaseId,
    x-ms-version 2021-04-10): with another lease id 412 LeaseIdMismatchWithBlobOperation, a line
    break after the declaration; with the file's infinite lease 200 with ``x-ms-resource-type:
    file`` and no ``x-ms-lease-*`` header (QueryWithError: the same without a lease)."""
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/jCzkiWxVJQ"
    blob = {"x-ms-version": "2021-04-10"}
    assert http.request("PUT", f"{path}?resource=file", DFS).status == 201
    assert http.request("PUT", path, {**blob, "x-ms-blob-type": "BlockBlob"}).status == 201
    plain = http.request("POST", f"{path}?comp=query", {**blob, "Content-Type": "application/xml"}, QUERY)
    assert plain.status == 200 and plain.headers["x-ms-resource-type"] == "file"
    assert not [name for name in plain.headers if name.startswith("x-ms-lease-")]
    lease = "21df52d0-2920-90bc-995c-aa2a2523f9c6"
    acquire = {
        **blob,
        "x-ms-lease-action": "acquire",
        "x-ms-lease-duration": "-1",
        "x-ms-proposed-lease-id": lease,
    }
    assert http.request("PUT", f"{path}?comp=lease", acquire).status == 201
    query = {**blob, "Content-Type": "application/xml; charset=UTF-8"}
    other = http.request(
        "POST",
        f"{path}?comp=query",
        {**query, "x-ms-lease-id": "92a00f21-7556-28aa-d384-81c0bc7d9310"},
        QUERY,
    )
    assert (other.status, other.code) == (412, "LeaseIdMismatchWithBlobOperation")
    assert other.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
    held = http.request("POST", f"{path}?comp=query", {**query, "x-ms-lease-id": lease}, QUERY)
    assert held.status == 200 and held.headers["content-type"] == "avro/binary"
    assert held.headers["x-ms-resource-type"] == "file" and held.headers["x-ms-blob-type"] == "BlockBlob"
    assert not [name for name in held.headers if name.startswith("x-ms-lease-")]
    assert "x-ms-owner" not in held.headers and "x-ms-permissions" not in held.headers


def test_set_expiry_errors_as_recorded(fs: FileSystemClient, lake: ServerProcess) -> None:
    """Set Expiry (``PUT <file>?comp=expiry``, DataLakeFileClientTest.ScheduleForDeletion,
    x-ms-version 2021-04-10): RelativeToNow or Absolute without ``x-ms-expiry-time`` is 400
    MissingRequiredHeader naming it, a line break after the declaration and the apostrophe of
    "that's" written ``&apos;`` (303 bytes with Azure's 36-character request id); an Absolute
    ``x-ms-expiry-time`` of "1000" is the bare 400 InvalidHeaderValue, no header named (255
    bytes); RelativeToNow 1000 and an HTTP date are taken."""
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/o3ShWEBKt6"
    blob = {"x-ms-version": "2021-04-10"}
    assert http.request("PUT", f"{path}?resource=file", DFS).status == 201
    for option in ("RelativeToNow", "Absolute"):
        missing = http.request("PUT", f"{path}?comp=expiry", {**blob, "x-ms-expiry-option": option})
        assert (missing.status, missing.code, len(missing.body)) == (400, "MissingRequiredHeader", 303)
        assert missing.body.startswith(
            b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error><Code>MissingRequiredHeader</Code>'
            b"<Message>An HTTP header that&apos;s mandatory for this request is not specified.\nRequestId:"
        )
        assert missing.body.endswith(b"</Message><HeaderName>x-ms-expiry-time</HeaderName></Error>")
    unreadable = {**blob, "x-ms-expiry-option": "Absolute", "x-ms-expiry-time": "1000"}
    bad = http.request("PUT", f"{path}?comp=expiry", unreadable)
    assert (bad.status, bad.code, len(bad.body)) == (400, "InvalidHeaderValue", 255)
    assert bad.body.endswith(b"</Message></Error>")  # no HeaderName, no HeaderValue
    relative = {**blob, "x-ms-expiry-option": "RelativeToNow", "x-ms-expiry-time": "1000"}
    assert http.request("PUT", f"{path}?comp=expiry", relative).status == 200
    absolute = {**blob, "x-ms-expiry-option": "Absolute", "x-ms-expiry-time": "Wed, 29 Sep 2100 09:53:03 GMT"}
    assert http.request("PUT", f"{path}?comp=expiry", absolute).status == 200
