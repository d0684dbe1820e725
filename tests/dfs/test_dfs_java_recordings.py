"""Requests the Java SDK (``azure-storage-file-datalake``) sends, answered as its recordings of
real Azure show (``Azure/azure-sdk-assets``,
``java/sdk/storage/azure-storage-file-datalake/src/test/resources/session-records/``).

* ``FileApiTest.getPropertiesDefault.json`` (x-ms-version 2023-01-03) and
  ``FileApiTest.renameSasToken.json`` (2023-08-03, the HEAD through a file system SAS after the
  rename): Get Blob Properties of a file on an HNS account answers ``x-ms-owner``,
  ``x-ms-group``, ``x-ms-permissions`` and ``x-ms-resource-type`` but no ``x-ms-acl``. The header
  came with version 2023-11-03 (Learn, "Version 2023-11-03": Get Blob Properties and Get Blob
  answer it for HNS accounts); the .NET SDK's ``FileClientTests/GetPropertiesAsync.json`` shows
  it at 2024-08-04. ``FileApiTest.perCallPolicy.json`` (2019-02-02): no ``x-ms-owner``,
  ``x-ms-group``, ``x-ms-permissions`` or ``x-ms-resource-type`` either; the first three came
  with 2020-06-12 (Learn, "Version 2020-06-12"), the resource type is taken to come with them.
* ``FileApiTest.createOptionsWithLeaseIdError.json`` (2023-01-03): Create Path (``resource=file``)
  with ``x-ms-proposed-lease-id`` and no ``x-ms-lease-duration`` is 400 ``MissingRequiredHeader``
  with ``"detail": {"HeaderName": "x-ms-lease-duration"}`` after the message (Content-Length 250,
  as ours for ids of the same length). The recording does not show whether the file was made; a
  missing header is refused with the request's checks here, before the path is created.
* ``FileApiTest.appendDataLeaseFail.json`` (2023-01-03): Append Data with an ``x-ms-lease-id``
  other than the one an infinite lease (taken through the Blob API's ``comp=lease``) holds is 412
  ``LeaseIdMismatch``, "The lease ID specified did not match the lease ID for the resource."
  (Content-Length 199, as ours); the Blob API keeps ``LeaseIdMismatchWithBlobOperation``. Flush
  is not recorded; it shares the endpoint's naming, as LeaseNotPresent does.
* ``SoftDeleteTests.restorePathError.json`` (2023-01-03): Undelete Path (``comp=undelete``) with
  ``x-ms-undelete-source: ?deletionid=bar``, in a file system that does not exist, is 400
  ``InvalidHeaderValue`` in the Blob API's XML naming the whole header as ``HeaderValue``
  (Content-Length 341, as ours); ours named ``bar`` alone.
* ``SoftDeleteTests.listDeletedPathsError.json`` (2023-01-03): List Deleted Paths
  (``restype=container&comp=list&showonly=deleted``) of a file system that does not exist is 404
  ``ContainerNotFound`` in the Blob API's XML (no line break after the declaration,
  Content-Length 225, as ours), as Undelete Path's and Set Expiry's errors are; ours was JSON.
* ``FileApiTest.queryFatalError.json`` (2023-01-03): Query Blob Contents of a file of an HNS
  account answers ``x-ms-resource-type: file`` and no lease headers (so does the .NET SDK's
  ``FileClientTests/QueryAsync_Min.json`` at 2024-08-04); the Java blob SDK's
  ``BlobBaseApiTests.queryFatalError.json`` (flat account, 2023-08-03) has ``x-ms-lease-state``
  and ``x-ms-lease-status``. The records were already Azure's: an empty data record, the fatal
  ``ParseError`` "Unexpected token 'rn1.rn2.rn3.rn4' at [byte: 0]. Expecting tokens '{', or
  '['. " at position 0, progress 1040 of 1040, end 1040. Whether a leased file's answer has
  lease headers on an HNS account is not recorded.
* ``SasTests.fileSystemUserDelegationCorrelationIdError.json`` (2023-01-03): List Paths with a
  user delegation SAS whose ``scid`` is not a GUID (``invalidcid``) is 403
  ``AuthenticationFailed`` with ``"detail": {"AuthenticationErrorDetail": "Signature fields not
  well formed."}`` after the message (Content-Length 343, as ours); ours took the SAS.
* ``SasTests.accountSasFileDeleteError.json`` (2023-01-03): the Java SDK's Delete File (a bare
  ``DELETE`` asking for JSON) with a read-only account SAS is Delete Path's 403
  ``AuthorizationPermissionMismatch`` in JSON (Content-Length 227, as ours); the SAS in the query
  made ours the Blob API's Delete Blob, answered in XML.
* ``FileApiTest.appendDataMd5.json`` (2023-01-03): Append Data with a ``Content-MD5`` answers it
  back (``Content-MD5: wh+Wm18D0z1D4E+PE252gg==`` for ``default``); ours ignored the header. A
  hash that does not match the data is refused with 400, as the reference documents ("Path -
  Update", ContentHash); the code Azure's DFS endpoint writes for it is not recorded: ours is the
  Blob API's ``Md5Mismatch``, and the data is not staged.

Raw HTTP (the SDKs send versions past 2023-11-03).
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import AccountSasPermissions, BlobServiceClient, ResourceTypes, generate_account_sas
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient, generate_file_system_sas

from tests.blobhttp import BlobHttp, Reply
from tests.dfs.conftest import DATA_READER
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import SelfSignedCert, StaticTokenCredential, make_jwt


@pytest.mark.parametrize(
    ("version", "posix", "has_acl"),
    [
        ("2019-02-02", False, False),
        ("2020-06-12", True, False),
        ("2023-01-03", True, False),
        ("2023-08-03", True, False),
        ("2023-11-03", True, True),
        ("2024-08-04", True, True),
    ],
)
@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_blob_reads_answer_the_path_by_version(
    fs: FileSystemClient, lake: ServerProcess, method: str, version: str, posix: bool, has_acl: bool
) -> None:
    fs.create_file("file.bin")
    answer = BlobHttp(lake.blob_port).request(
        method, f"/{fs.file_system_name}/file.bin", {"x-ms-version": version, "Accept": "application/xml"}
    )
    assert answer.status == 200, answer
    assert answer.headers["x-ms-blob-type"] == "BlockBlob"
    if not posix:
        assert not {"x-ms-resource-type", "x-ms-owner", "x-ms-group", "x-ms-permissions", "x-ms-acl"} & set(
            answer.headers
        )
        return
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


LEASE = "500ec8b7-d96f-4f82-a5cf-2ba78d2259a4"
MD5_DEFAULT = "wh+Wm18D0z1D4E+PE252gg=="  # of b"default", as recorded


def test_create_with_a_proposed_lease_and_no_duration(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/leased.bin"
    headers = {"Accept": "application/json", "x-ms-version": "2023-01-03", "x-ms-proposed-lease-id": LEASE}
    answer = http.request("PUT", path + "?resource=file", headers)
    assert (answer.status, answer.code) == (400, "MissingRequiredHeader"), answer
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    assert answer.headers["content-length"] == "250"
    error = json.loads(answer.body)["error"]
    assert error["message"].startswith(
        "An HTTP header that's mandatory for this request is not specified.\nRequestId:"
    )
    assert error["detail"] == {"HeaderName": "x-ms-lease-duration"}
    assert list(error) == ["code", "message", "detail"]
    assert not fs.get_file_client("leased.bin").exists()
    # With the duration the file is made under the proposed lease.
    created = http.request("PUT", path + "?resource=file", {**headers, "x-ms-lease-duration": "15"})
    assert created.status == 201, created
    properties = fs.get_file_client("leased.bin").get_file_properties()
    assert (properties.lease.state, properties.lease.duration) == ("leased", "fixed")


OTHER_LEASE = "89459db5-b3d9-4ddd-b8ee-c3c7ea366141"


@pytest.mark.parametrize("action", ["append", "flush"])
def test_write_with_another_lease_id(fs: FileSystemClient, lake: ServerProcess, action: str) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/leased.bin"
    version = {"Accept": "application/json", "x-ms-version": "2023-01-03"}
    assert http.request("PUT", path + "?resource=file", {**version, "If-None-Match": "*"}).status == 201
    lease = {"x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1", "x-ms-proposed-lease-id": LEASE}
    assert http.request("PUT", path + "?comp=lease", {"x-ms-version": "2023-01-03", **lease}).status == 201
    headers = {**version, "x-ms-lease-id": OTHER_LEASE}
    if action == "append":
        headers["Content-Type"] = "application/octet-stream"
        answer = http.request("PATCH", path + "?action=append&position=0", headers, b"default")
    else:
        answer = http.request("PATCH", path + "?action=flush&position=0", headers)
    assert (answer.status, answer.code) == (412, "LeaseIdMismatch"), answer
    assert answer.headers["content-length"] == "199"
    assert json.loads(answer.body)["error"]["message"].startswith(
        "The lease ID specified did not match the lease ID for the resource.\nRequestId:"
    )
    blob = http.request("PUT", path, {"x-ms-blob-type": "BlockBlob", "x-ms-lease-id": OTHER_LEASE}, b"x")
    assert (blob.status, blob.code) == (412, "LeaseIdMismatchWithBlobOperation"), blob


@pytest.mark.parametrize("exists", [False, True])
def test_undelete_with_a_deletion_id_that_is_not_a_number(
    fs: FileSystemClient, lake: ServerProcess, exists: bool
) -> None:
    container = fs.file_system_name if exists else fs.file_system_name + "missing"
    answer = BlobHttp(lake.blob_port).request(
        "PUT",
        f"/{container}/foo?comp=undelete",
        {
            "Accept": "application/json",
            "x-ms-version": "2023-01-03",
            "x-ms-undelete-source": "?deletionid=bar",
        },
    )
    assert (answer.status, answer.code) == (400, "InvalidHeaderValue"), answer
    assert answer.headers["content-type"] == "application/xml"
    assert answer.headers["content-length"] == "341"
    assert answer.error_fields()["HeaderName"] == "x-ms-undelete-source"
    assert answer.error_fields()["HeaderValue"] == "?deletionid=bar"


def test_list_deleted_paths_of_a_missing_file_system(fs: FileSystemClient, lake: ServerProcess) -> None:
    answer = BlobHttp(lake.blob_port).request(
        "GET",
        f"/{fs.file_system_name}missing?restype=container&comp=list&showonly=deleted",
        {"Accept": "application/xml", "x-ms-version": "2023-01-03"},
    )
    assert (answer.status, answer.code) == (404, "ContainerNotFound"), answer
    assert answer.headers["content-type"] == "application/xml"
    assert answer.headers["content-length"] == "225"
    assert answer.body.startswith(
        b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><Error><Code>ContainerNotFound'
    )
    assert answer.error_fields()["Message"].startswith("The specified container does not exist.\nRequestId:")


def test_sdk_reads_the_missing_file_system(fs: FileSystemClient, service: DataLakeServiceClient) -> None:
    missing = service.get_file_system_client(fs.file_system_name + "missing")
    with pytest.raises(ResourceNotFoundError) as caught:
        next(iter(missing.list_deleted_paths()))
    assert caught.value.error_code == "ContainerNotFound"


QUERY_CONTENT = b"rn1.rn2.rn3.rn4\n" + b"100.200.300.400\n300.400.500.600\n" * 32
QUERY_JSON = (
    b"<?xml version='1.0' encoding='UTF-8'?><QueryRequest><QueryType>SQL</QueryType>"
    b"<Expression>SELECT * from BlobStorage</Expression><InputSerialization><Format><Type>json</Type>"
    b"<JsonTextConfiguration><RecordSeparator></RecordSeparator></JsonTextConfiguration></Format>"
    b"</InputSerialization></QueryRequest>"
)
FATAL = (  # the error record: fatal, its name, its description, position 0
    b"\x02\x01\x14ParseError\x9e\x01"
    b"Unexpected token 'rn1.rn2.rn3.rn4' at [byte: 0]. Expecting tokens '{', or '['. \x00"
)


def _query(http: BlobHttp, path: str) -> Reply:
    headers = {"Accept": "application/xml", "Content-Type": "application/xml", "x-ms-version": "2023-01-03"}
    return http.request("POST", path + "?comp=query", headers, QUERY_JSON)


def test_query_of_an_hns_file(fs: FileSystemClient, lake: ServerProcess) -> None:
    file = fs.create_file("query.json")
    file.upload_data(QUERY_CONTENT, overwrite=True)
    answer = _query(BlobHttp(lake.blob_port), f"/{fs.file_system_name}/query.json")
    assert answer.status == 200, answer
    assert answer.headers["content-type"] == "avro/binary"
    assert answer.headers["x-ms-resource-type"] == "file"
    assert answer.headers["x-ms-blob-type"] == "BlockBlob"
    assert not {"x-ms-lease-state", "x-ms-lease-status", "x-ms-lease-duration"} & set(answer.headers)
    assert FATAL in answer.body
    assert b"\x02\x04\x00\x00" in answer.body  # one empty data record before it
    assert b"\x02\x0a\x04\xa0\x10\xa0\x10" in answer.body  # progress: 1040 of 1040
    assert b"\x02\x06\x06\xa0\x10" in answer.body  # end: 1040


def test_query_of_a_flat_blob_keeps_the_lease_headers(server: ServerProcess) -> None:
    service = BlobServiceClient.from_connection_string(server.connection_string)
    container = service.create_container("javaquery" + uuid.uuid4().hex[:8])
    try:
        container.upload_blob("query.json", QUERY_CONTENT)
        answer = _query(BlobHttp(server.blob_port), f"/{container.container_name}/query.json")
        assert answer.status == 200, answer
        assert (answer.headers["x-ms-lease-state"], answer.headers["x-ms-lease-status"]) == (
            "available",
            "unlocked",
        )
        assert "x-ms-resource-type" not in answer.headers
        assert FATAL in answer.body
    finally:
        container.delete_container()


def test_delegation_sas_with_a_correlation_id_that_is_not_a_guid(
    oauth_hns_server: ServerProcess, cert: SelfSignedCert
) -> None:
    url = f"https://127.0.0.1:{oauth_hns_server.blob_port}/{DEV_ACCOUNT}"
    admin = DataLakeServiceClient(
        url, {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}, connection_verify=str(cert.cert)
    )
    fs = admin.create_file_system("scid" + uuid.uuid4().hex[:10])
    try:
        reader = DataLakeServiceClient(
            url,
            StaticTokenCredential(make_jwt(extra={"oid": DATA_READER})),
            connection_verify=str(cert.cert),
        )
        expiry = datetime.now(UTC) + timedelta(hours=1)
        key = reader.get_user_delegation_key(datetime.now(UTC) - timedelta(minutes=5), expiry)
        answers = {}
        for cid in ("invalidcid", str(uuid.uuid4())):
            sas = generate_file_system_sas(
                DEV_ACCOUNT, fs.file_system_name, key, permission="l", expiry=expiry, correlation_id=cid
            )
            answers[cid] = requests.get(
                f"{url}/{fs.file_system_name}?resource=filesystem&recursive=false&upn=false&{sas}",
                headers={"Accept": "application/json", "x-ms-version": "2023-01-03"},
                verify=str(cert.cert),
                timeout=30,
            )
        refused = answers.pop("invalidcid")
        assert (refused.status_code, refused.headers["x-ms-error-code"]) == (403, "AuthenticationFailed")
        assert refused.headers["content-length"] == "343"
        error = refused.json()["error"]
        assert error["detail"] == {"AuthenticationErrorDetail": "Signature fields not well formed."}
        assert error["message"].startswith("Server failed to authenticate the request.")
        (accepted,) = answers.values()
        assert accepted.status_code == 200, accepted.text
    finally:
        fs.delete_file_system()


@pytest.mark.parametrize("delete", [False, True])
def test_bare_delete_of_a_file_with_an_account_sas(
    fs: FileSystemClient, lake: ServerProcess, delete: bool
) -> None:
    fs.create_file("doomed.txt")
    sas = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, delete=delete),
        datetime.now(UTC) + timedelta(hours=1),
    )
    answer = BlobHttp(lake.blob_port).request(
        "DELETE",
        f"/{fs.file_system_name}/doomed.txt?{sas}",
        {"Accept": "application/json", "x-ms-version": "2023-01-03"},
        signed=False,
    )
    if delete:
        assert answer.status == 200, answer  # Delete Path's answer, as to the Shared Key form
        assert not fs.get_file_client("doomed.txt").exists()
        return
    assert (answer.status, answer.code) == (403, "AuthorizationPermissionMismatch"), answer
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    assert answer.headers["content-length"] == "227"
    assert json.loads(answer.body)["error"]["message"].startswith(
        "This request is not authorized to perform this operation using this permission.\nRequestId:"
    )
    assert fs.get_file_client("doomed.txt").exists()


def test_append_with_content_md5(fs: FileSystemClient, lake: ServerProcess) -> None:
    http = BlobHttp(lake.blob_port)
    path = f"/{fs.file_system_name}/md5.txt"
    version = {"Accept": "application/json", "x-ms-version": "2023-01-03"}
    assert http.request("PUT", path + "?resource=file", version).status == 201
    headers = {**version, "Content-Type": "application/octet-stream"}
    good = http.request(
        "PATCH", path + "?action=append&position=0", {**headers, "Content-MD5": MD5_DEFAULT}, b"default"
    )
    assert good.status == 202, good
    assert good.headers["content-md5"] == MD5_DEFAULT
    plain = http.request("PATCH", path + "?action=append&position=7", headers, b"default")
    assert plain.status == 202 and "content-md5" not in plain.headers
    bad = http.request(
        "PATCH", path + "?action=append&position=14", {**headers, "Content-MD5": MD5_DEFAULT}, b"other!!"
    )
    assert bad.status == 400, bad
    assert bad.headers["content-type"] == "application/json; charset=utf-8"
    flushed = http.request("PATCH", path + "?action=flush&position=21", version)
    assert flushed.code == "InvalidFlushPosition", flushed  # the refused data was not staged
    assert http.request("PATCH", path + "?action=flush&position=14", version).status == 200
    assert fs.get_file_client("md5.txt").download_file().readall() == b"defaultdefault"


def test_sdk_append_with_validate_content(fs: FileSystemClient) -> None:
    file = fs.create_file("validated.txt")
    answer = file.append_data(b"default", 0, 7, validate_content=True)
    assert answer["content_md5"] == base64.b64decode(MD5_DEFAULT)
