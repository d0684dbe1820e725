"""Blob answers compared with Azure's recordings of the Go SDK's azblob tests
(``go/sdk/storage/azblob/testdata/recordings/Test/`` in Azure/azure-sdk-assets, x-ms-version
2023-11-03 on an account that keeps versions), sent over raw HTTP as the Go client sent them, and
read back through the Python SDK (sync and aio) where it can express the request."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, RetentionPolicy, generate_blob_sas
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

GO_VERSION = "2023-11-03"
SECOND, SECOND_KEY = "gosecond", base64.b64encode(b"second account key" * 4).decode()


@pytest.fixture(scope="module", params=backend_names())
def go_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose account keeps versions, as the recording account did, one per backend."""
    accounts = ["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"{SECOND}:{SECOND_KEY}"]
    extra = [*fresh_store(request.param), "--blob-versioning", *accounts]
    process = ServerProcess(tmp_path_factory.mktemp("gorec"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def http(go_server: ServerProcess) -> BlobHttp:
    return BlobHttp(go_server.blob_port)


@pytest.fixture
def box(http: BlobHttp) -> str:
    """A new container's name."""
    return http.new_container("goc")


def test_permanent_delete_while_the_account_does_not_allow_it(
    go_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """TestAppendBlockPermanentDeleteWithoutPermission: Delete Blob of a snapshot with
    ``deletetype=Permanent`` on an account that does not allow it is 409
    ``PermanentDeleteIsOff``, "Permanent delete is off on the storage account." (236 bytes)."""
    assert http.request("PUT", f"/{box}/ab", {"x-ms-blob-type": "AppendBlob"}).status == 201
    snapshot = http.request("PUT", f"/{box}/ab?comp=snapshot").headers["x-ms-snapshot"]
    refused = http.request(
        "DELETE", f"/{box}/ab?deletetype=Permanent&snapshot={snapshot.replace(':', '%3A')}"
    )
    assert (refused.status, refused.code, len(refused.body)) == (409, "PermanentDeleteIsOff", 236)
    assert (
        refused.error_fields()["Message"].split("\n")[0] == "Permanent delete is off on the storage account."
    )
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        blob = service.get_blob_client(box, "ab", snapshot=snapshot)
        with pytest.raises(HttpResponseError) as caught:
            blob.delete_blob(blob_delete_type="Permanent")
        assert caught.value.error_code == "PermanentDeleteIsOff"


def test_clear_pages_names_range_in_its_error(http: BlobHttp, box: str) -> None:
    """TestBlobClearPagesInvalidRange: a clear of ``x-ms-range: bytes=0-512`` (not a whole page)
    is 400 InvalidHeaderValue naming ``Range`` with the value sent (322 bytes)."""
    created = http.request(
        "PUT", f"/{box}/pb", {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "5120"}
    )
    assert created.status == 201
    cleared = http.request(
        "PUT", f"/{box}/pb?comp=page", {"x-ms-page-write": "clear", "x-ms-range": "bytes=0-512"}
    )
    assert (cleared.status, cleared.code, len(cleared.body)) == (400, "InvalidHeaderValue", 322)
    fields = cleared.error_fields()
    assert (fields["HeaderName"], fields["HeaderValue"]) == ("Range", "bytes=0-512")


def test_append_block_and_put_page_echo_the_md5_alone(
    go_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """TestAppendBlockWithMD5 and TestPutPagesWithMD5: an Append Block or a Put Page (update)
    sent with a Content-MD5 answers that Content-MD5 and no x-ms-content-crc64; TestAppendBlockWithCRC64
    and TestBlobClearPagesInvalidRange: without one, x-ms-content-crc64 alone. A wrong MD5 is 400
    Md5Mismatch with both digests (405 bytes). From x-ms-version 2026-10-06 the CRC64 comes beside
    the MD5 (azure-storage-blob's recording test_append_block_with_md5; the Rust SDK's
    test_append_block_transactional_checksums at 2026-04-06 still has the MD5 alone)."""
    go = {"x-ms-version": GO_VERSION}
    data = bytes(range(256)) * 4
    md5 = "suqff86oMaSmOyE/QaiFWw=="  # of data
    assert http.request("PUT", f"/{box}/ab", {"x-ms-blob-type": "AppendBlob"}).status == 201
    appended = http.request("PUT", f"/{box}/ab?comp=appendblock", {**go, "Content-MD5": md5}, data)
    assert appended.status == 201 and appended.headers["content-md5"] == md5
    assert "x-ms-content-crc64" not in appended.headers
    plain = http.request("PUT", f"/{box}/ab?comp=appendblock", {}, data)
    assert plain.status == 201 and "content-md5" not in plain.headers
    assert plain.headers["x-ms-content-crc64"] == "RxTQGC+NjYg="
    wrong = http.request(
        "PUT", f"/{box}/ab?comp=appendblock", {"Content-MD5": "rx/1AUvhK6AO8uvjeM4rGQ=="}, data
    )
    assert (wrong.status, wrong.code, len(wrong.body)) == (400, "Md5Mismatch", 405)
    created = http.request(
        "PUT", f"/{box}/pb", {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "5120"}
    )
    assert created.status == 201
    page = {"x-ms-page-write": "update", "x-ms-range": "bytes=0-1023"}
    written = http.request("PUT", f"/{box}/pb?comp=page", {**page, **go, "Content-MD5": md5}, data)
    assert written.status == 201 and written.headers["content-md5"] == md5
    assert "x-ms-content-crc64" not in written.headers
    for version, both in (("2026-04-06", False), ("2026-10-06", True)):
        headers = {"x-ms-version": version, "Content-MD5": md5}
        again = http.request("PUT", f"/{box}/ab?comp=appendblock", headers, data)
        assert again.headers["content-md5"] == md5
        assert ("x-ms-content-crc64" in again.headers) is both, version
        again = http.request("PUT", f"/{box}/pb?comp=page", {**page, **headers}, data)
        assert ("x-ms-content-crc64" in again.headers) is both, version
    plain = http.request("PUT", f"/{box}/pb?comp=page", page, data)
    assert (
        plain.status == 201 and "content-md5" not in plain.headers and "x-ms-content-crc64" in plain.headers
    )

    async def append_with_md5() -> dict[str, object]:
        async with AsyncBlobServiceClient.from_connection_string(go_server.connection_string) as service:
            blob = service.get_blob_client(box, "ab")
            return await blob.append_block(data, validate_content=True)

    answer = asyncio.run(append_with_md5())
    assert answer["content_md5"] is not None and answer.get("content_crc64") is not None  # 2026-10-06


def test_listings_mark_the_current_version_whatever_they_include(
    go_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """TestContainerListBlobsSpecificValidPrefix (List Blobs with a prefix and no include) and
    TestAppendBlockPermanentDeleteWithoutPermission (``include=snapshots``): on an account that
    keeps versions each current blob is listed with ``<VersionId>`` then
    ``<IsCurrentVersion>true</IsCurrentVersion>``; a snapshot has neither."""
    written = http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"GoBlockBlobData")
    assert written.status == 201
    snapshot = http.request("PUT", f"/{box}/b?comp=snapshot")
    version = snapshot.headers["x-ms-version-id"]  # a snapshot makes a version, as recorded
    current = f"<Name>b</Name><VersionId>{version}</VersionId><IsCurrentVersion>true</IsCurrentVersion>"
    for query in ("&prefix=b", "&include=snapshots"):
        listed = http.request(
            "GET", f"/{box}?restype=container&comp=list{query}", {"x-ms-version": GO_VERSION}
        )
        assert listed.status == 200 and current.encode() in listed.body
    snapshotted = http.request("GET", f"/{box}?restype=container&comp=list&include=snapshots")
    assert snapshotted.body.count(b"<IsCurrentVersion>") == 1 and b"<Snapshot>" in snapshotted.body
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        listed = [
            (b.version_id, b.is_current_version) for b in service.get_container_client(box).list_blobs()
        ]
    assert listed == [(version, True)]

    async def listed_async() -> list[tuple[str | None, bool | None]]:
        async with AsyncBlobServiceClient.from_connection_string(go_server.connection_string) as service:
            container = service.get_container_client(box)
            return [(b.version_id, b.is_current_version) async for b in container.list_blobs()]

    assert asyncio.run(listed_async()) == [(version, True)]


def _retention_body(days: str | None) -> bytes:
    """The Go SDK's body; ``None`` is its empty policy (no Enabled, TestAccountDeleteRetentionPolicyEmpty)."""
    inner = b"" if days is None else b"<Enabled>true</Enabled>" + days.encode()
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<StorageServiceProperties><DeleteRetentionPolicy>'
        + inner
        + b"</DeleteRetentionPolicy></StorageServiceProperties>"
    )


@pytest.mark.parametrize(
    ("days", "position", "reason", "length"),
    [
        (
            "<Days>0</Days>",
            89,
            "Retention days must be greater than 0 and less than or equal to 365 days.",
            375,
        ),
        ("", 75, "Element is missing: Days.", 327),
        (
            "<Days>366</Days>",
            91,
            "Retention days must be greater than 0 and less than or equal to 365 days.",
            375,
        ),
        (None, 52, "Element is missing: Enabled.", 330),
    ],
)
def test_delete_retention_days_refused_as_a_document_error(
    go_server: ServerProcess, http: BlobHttp, days: str | None, position: int, reason: str, length: int
) -> None:
    """TestAccountDeleteRetentionPolicyDaysTooSmall (``<Days>0</Days>``) and
    TestAccountDeleteRetentionPolicyDaysOmitted: Set Blob Service Properties with the Go SDK's
    body is 400 InvalidXmlDocument at the line and position of the name in
    ``</DeleteRetentionPolicy>``, with the reason (375 and 327 bytes). 366 days takes the same
    reason, which names the upper bound. TestAccountDeleteRetentionPolicyEmpty: a policy without
    Enabled is "Element is missing: Enabled." at the same place (330 bytes). The account's
    properties stay as they were."""
    path = "/?restype=service&comp=properties"
    reply = http.request("PUT", path, {"Content-Type": "application/xml"}, _retention_body(days))
    assert (reply.status, reply.code, len(reply.body)) == (400, "InvalidXmlDocument", length)
    fields = reply.error_fields()
    assert (fields["LineNumber"], fields["LinePosition"], fields["Reason"]) == ("2", str(position), reason)
    assert fields["Message"].split("\n")[0] == "XML specified is not syntactically valid."
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        assert not service.get_service_properties()["delete_retention_policy"].enabled
    ok = http.request("PUT", path, {"Content-Type": "application/xml"}, _retention_body("<Days>7</Days>"))
    assert ok.status == 202
    disabled = _retention_body("").replace(b"true", b"false")  # Enabled false, no Days: accepted
    assert http.request("PUT", path, {"Content-Type": "application/xml"}, disabled).status == 202


@pytest.mark.parametrize("condition", ["eq", "le", "lt"])
@pytest.mark.parametrize("write", ["clear", "update"])
def test_negative_sequence_number_conditions_are_invalid_input(
    http: BlobHttp, box: str, condition: str, write: str
) -> None:
    """TestBlobClearPagesIfSequenceNumberEqualNegOne, LTENegOne, LessThanNegOne and
    TestBlobPutPagesIfSequenceNumberLTENegOne, LessThanNegOne: a Put Page whose
    ``x-ms-if-sequence-number-*`` is ``-1`` is 400 InvalidInput with no detail (220 bytes);
    the page stays as it was."""
    created = http.request(
        "PUT", f"/{box}/pb", {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "5120"}
    )
    assert created.status == 201
    page = {"x-ms-page-write": write, "x-ms-range": "bytes=0-511"}
    body = b"x" * 512 if write == "update" else b""
    refused = http.request(
        "PUT", f"/{box}/pb?comp=page", {**page, f"x-ms-if-sequence-number-{condition}": "-1"}, body
    )
    assert (refused.status, refused.code, len(refused.body)) == (400, "InvalidInput", 220)
    assert set(refused.error_fields()) == {"Code", "Message"}
    assert http.request("GET", f"/{box}/pb", {"x-ms-range": "bytes=0-511"}).body == bytes(512)
    ok = http.request(
        "PUT", f"/{box}/pb?comp=page", {**page, f"x-ms-if-sequence-number-{condition}": "0"}, body
    )
    assert ok.status == (412 if condition == "lt" else 201)


def test_snapshot_of_a_malformed_snapshot_names_the_parameter(http: BlobHttp, box: str) -> None:
    """TestBlobSnapshotOfSnapshot: Snapshot Blob whose ``snapshot`` parameter is no snapshot time
    is 400 InvalidQueryParameterValue naming ``snapshot`` and its value, as a read's is: no
    x-ms-error-code or x-ms-version header, a line break after the declaration (395 bytes). The
    recorded ``+`` signs are sent as ``%2B`` here (what Azure decodes them to, by the value it
    names). A well-formed snapshot time stays InvalidOperation."""
    assert http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"GoBlockBlobData").status == 201
    value = "2021-01-01+01:01:01++0000+UTC"
    sent = value.replace("+", "%2B").replace(":", "%3A")
    refused = http.request("PUT", f"/{box}/b?comp=snapshot&snapshot={sent}")
    assert (refused.status, refused.code, len(refused.body)) == (400, None, 395)
    assert "x-ms-version" not in refused.headers
    assert refused.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
    fields = refused.error_fields()
    assert (fields["Code"], fields["QueryParameterName"], fields["QueryParameterValue"]) == (
        "InvalidQueryParameterValue",
        "snapshot",
        value,
    )
    snapshot = http.request("PUT", f"/{box}/b?comp=snapshot").headers["x-ms-snapshot"]
    again = http.request("PUT", f"/{box}/b?comp=snapshot&snapshot={snapshot.replace(':', '%3A')}")
    assert (again.status, again.code) == (400, "InvalidOperation")


def test_six_signed_identifiers_name_no_place(go_server: ServerProcess, http: BlobHttp, box: str) -> None:
    """TestContainerSetPermissionsACLMoreThanFive: Set Container ACL with six identifiers (the Go
    SDK's body) is 400 InvalidXmlDocument with LineNumber 0, LinePosition 0 and an empty Reason
    (294 bytes); the container's ACL stays empty."""
    policy = (
        "<SignedIdentifier><AccessPolicy><Permission>r</Permission><Expiry>2049-06-11T20:00:00Z</Expiry>"
        "<Start>2021-06-11T20:00:00Z</Start></AccessPolicy><Id>000{}</Id></SignedIdentifier>"
    )
    body = '<?xml version="1.0" encoding="UTF-8"?>\n<SignedIdentifiers>{}</SignedIdentifiers>'
    six = body.format("".join(policy.format(i) for i in range(6))).encode()
    headers = {"Content-Type": "application/xml", "x-ms-blob-public-access": "blob"}
    refused = http.request("PUT", f"/{box}?restype=container&comp=acl", headers, six)
    assert (refused.status, refused.code, len(refused.body)) == (400, "InvalidXmlDocument", 294)
    assert refused.body.endswith(
        b"<LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason /></Error>"
    )
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        assert service.get_container_client(box).get_container_access_policy()["signed_identifiers"] == []
    five = body.format("".join(policy.format(i) for i in range(5))).encode()
    assert http.request("PUT", f"/{box}?restype=container&comp=acl", headers, five).status == 200


DECLARATION_BREAK = b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error><Code>'


def test_append_block_and_put_page_from_url_errors_break_after_the_declaration(
    go_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """TestAppendBlockFromURLWithMD5 (a wrong x-ms-source-content-md5: 400 Md5Mismatch, 278
    bytes, no digests) and TestAppendBlockFromURLCopySourceAuthNegative: Append Block From URL's
    errors have a line break after the XML declaration, as Put Page From URL's do (.NET's
    UploadPagesFromUriAsync_SourceBearerTokenFail); Put Blob From URL's have none. The MD5 given
    is echoed alone on success."""
    data = bytes(range(256)) * 16
    md5 = "K808TeIMkY4Z+rXDYknHDQ=="  # of data
    assert http.request("PUT", f"/{box}/src", {"x-ms-blob-type": "BlockBlob"}, data).status == 201
    sas = generate_blob_sas(
        DEV_ACCOUNT,
        box,
        "src",
        account_key=DEV_KEY,
        permission="r",
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    source = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/src?{sas}"
    assert http.request("PUT", f"/{box}/dest", {"x-ms-blob-type": "AppendBlob"}).status == 201
    copy = {"x-ms-copy-source": source, "x-ms-source-range": "bytes=0-4095"}
    wrong = http.request(
        "PUT", f"/{box}/dest?comp=appendblock", {**copy, "x-ms-source-content-md5": "A" * 22 + "=="}
    )
    assert (wrong.status, wrong.code, len(wrong.body)) == (400, "Md5Mismatch", 278)
    assert wrong.body.startswith(DECLARATION_BREAK)
    right = http.request("PUT", f"/{box}/dest?comp=appendblock", {**copy, "x-ms-source-content-md5": md5})
    assert right.status == 201 and right.headers["content-md5"] == md5
    assert http.request(
        "PUT", f"/{box}/pb", {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "4096"}
    )
    missing = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/missing?{sas}"
    page = {"x-ms-copy-source": missing, "x-ms-source-range": "bytes=0-511", "x-ms-range": "bytes=0-511"}
    refused = http.request("PUT", f"/{box}/pb?comp=page", {**page, "x-ms-page-write": "update"})
    assert (refused.status, refused.code) == (403, "CannotVerifyCopySource")  # the SAS is src's
    assert refused.body.startswith(DECLARATION_BREAK)
    whole = http.request(
        "PUT", f"/{box}/copied", {"x-ms-blob-type": "BlockBlob", "x-ms-copy-source": missing}
    )
    assert (whole.status, whole.code) == (403, "CannotVerifyCopySource")
    assert whole.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><Error>')


def test_a_source_token_that_is_no_token_is_401(go_server: ServerProcess, http: BlobHttp, box: str) -> None:
    """TestAppendBlockFromURLCopySourceAuthNegative: Append Block From URL whose
    ``x-ms-copy-source-authorization`` is ``Bearer faketoken`` is 401 CannotVerifyCopySource with
    the generic message and nothing of the source's (251 bytes, a line break after the
    declaration). ``Bearer auth token`` stays the source's 400 InvalidAuthenticationInfo, as .NET's
    recordings show."""
    assert http.request("PUT", f"/{box}/src", {"x-ms-blob-type": "BlockBlob"}, b"x" * 4096).status == 201
    assert http.request("PUT", f"/{box}/dest", {"x-ms-blob-type": "AppendBlob"}).status == 201
    source = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/src"
    fake = {"x-ms-copy-source": source, "x-ms-copy-source-authorization": "Bearer faketoken"}
    refused = http.request("PUT", f"/{box}/dest?comp=appendblock", fake)
    assert (refused.status, refused.code, len(refused.body)) == (401, "CannotVerifyCopySource", 251)
    assert refused.body.startswith(DECLARATION_BREAK)
    assert "x-ms-copy-source-status-code" not in refused.headers
    assert set(refused.error_fields()) == {"Code", "Message"}
    spaced = {**fake, "x-ms-copy-source-authorization": "Bearer auth token"}
    malformed = http.request("PUT", f"/{box}/dest?comp=appendblock", spaced)
    assert (malformed.status, malformed.code) == (400, "CannotVerifyCopySource")
    assert malformed.headers["x-ms-copy-source-error-code"] == "InvalidAuthenticationInfo"
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        target = service.get_blob_client(box, "target")
        with pytest.raises(HttpResponseError) as caught:
            target.upload_blob_from_url(source, source_authorization="Bearer faketoken")
        assert (caught.value.status_code, caught.value.error_code) == (401, "CannotVerifyCopySource")


def test_copy_blob_source_errors(go_server: ServerProcess, http: BlobHttp, box: str) -> None:
    """TestBlobStartCopySourceNonExistent: Copy Blob from a missing blob of the same account is
    404 BlobNotFound (215 bytes, nothing of a copy source's). TestBlobStartCopySourcePrivate:
    from a private blob of another account, signed with that other account's key, it is 401
    CannotVerifyCopySource in the source's words, "Server failed to authenticate the request.
    Please refer to the information in the www-authenticate header.", with nothing else (297
    bytes)."""
    missing = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/missing"
    refused = http.request("PUT", f"/{box}/copy", {"x-ms-copy-source": missing})
    assert (refused.status, refused.code, len(refused.body)) == (404, "BlobNotFound", 215)
    assert "x-ms-copy-source-status-code" not in refused.headers
    assert (
        http.request("PUT", f"/{box}/private", {"x-ms-blob-type": "BlockBlob"}, b"GoBlockBlobData").status
        == 201
    )
    with BlobServiceClient(
        go_server.blob_endpoint.replace(DEV_ACCOUNT, SECOND),
        credential={"account_name": SECOND, "account_key": SECOND_KEY},
    ) as other:
        target = other.create_container(f"cpyc{box}").get_blob_client("copyb")
        source = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/private"
        with pytest.raises(HttpResponseError) as caught:
            target.start_copy_from_url(source)
    error = caught.value
    assert (error.status_code, error.error_code) == (401, "CannotVerifyCopySource")
    assert error.response is not None and len(error.response.body()) == 297
    assert "x-ms-copy-source-status-code" not in error.response.headers
    assert (
        "<Message>Server failed to authenticate the request. Please refer to the information in the "
        "www-authenticate header.\n" in error.response.text()
    )


def test_find_blobs_by_tags_writes_the_quotes_of_where_as_entities(
    go_server: ServerProcess, http: BlobHttp
) -> None:
    """TestAccountFilterBlobs: Find Blobs by Tags with ``where="key"='value'`` and nothing found
    answers ``<Where>&quot;key&quot;=&apos;value&apos;</Where><Blobs/><NextMarker/>`` after a line
    break; the SDK reads the expression back."""
    found = http.request("GET", "/?comp=blobs&where=%22key%22%3D%27value%27", {"x-ms-version": GO_VERSION})
    assert found.status == 200
    assert found.body.endswith(
        b"><Where>&quot;key&quot;=&apos;value&apos;</Where><Blobs/><NextMarker/></EnumerationResults>"
    )
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        assert list(service.find_blobs_by_tags("\"key\"='value'")) == []


def test_delete_type_on_an_account_that_keeps_versions(http: BlobHttp, box: str) -> None:
    """Versioning on, soft delete off (as the Go SDK's account was: its version deletes answer
    true). TestDeleteBlobWithoutLeaseId: deleting the blob answers x-ms-delete-type-permanent
    false (a previous version keeps it); TestAppendBlockPermanentDeleteWithoutPermission: so does
    deleting its snapshots alone; TestDeleteSpecificBlobVersion: deleting a version, true."""
    written = http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"data0")
    first = written.headers["x-ms-version-id"]
    assert http.request("PUT", f"/{box}/b", {"x-ms-blob-type": "BlockBlob"}, b"data1").status == 201
    assert http.request("PUT", f"/{box}/b?comp=snapshot").status == 201
    only = http.request("DELETE", f"/{box}/b", {"x-ms-delete-snapshots": "only"})
    assert (only.status, only.headers["x-ms-delete-type-permanent"]) == (202, "false")
    version = http.request("DELETE", f"/{box}/b?versionid={first.replace(':', '%3A')}")
    assert (version.status, version.headers["x-ms-delete-type-permanent"]) == (202, "true")
    base = http.request("DELETE", f"/{box}/b")
    assert (base.status, base.headers["x-ms-delete-type-permanent"]) == (202, "false")


def test_signed_identifier_too_long_names_its_place(
    go_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """TestContainerSetPermissionsSignedIdentifierTooLong: Set Container ACL with two identifiers
    whose Ids are 65 characters (the Go SDK's 554-byte body) is 400 InvalidXmlDocument at line 2,
    position 259 (the name of the second ``<SignedIdentifier>``), "Signed identifier ID cannot be
    empty or over 64 characters in length" (371 bytes), as the Queue service answers."""
    policy = (
        "<SignedIdentifier><AccessPolicy><Permission>r</Permission><Expiry>2021-06-11T20:00:00Z</Expiry>"
        "<Start>2021-06-11T20:05:00Z</Start></AccessPolicy><Id>" + "a" * 65 + "</Id></SignedIdentifier>"
    )
    declaration = '<?xml version="1.0" encoding="UTF-8"?>\n'
    body = f"{declaration}<SignedIdentifiers>{policy * 2}</SignedIdentifiers>".encode()
    assert len(body) == 554
    headers = {"Content-Type": "application/xml", "x-ms-blob-public-access": "blob"}
    refused = http.request("PUT", f"/{box}?restype=container&comp=acl", headers, body)
    assert (refused.status, refused.code, len(refused.body)) == (400, "InvalidXmlDocument", 371)
    fields = refused.error_fields()
    assert (fields["LineNumber"], fields["LinePosition"]) == ("2", "259")
    assert fields["Reason"] == "Signed identifier ID cannot be empty or over 64 characters in length"
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        assert service.get_container_client(box).get_container_access_policy()["public_access"] is None


def test_listed_copy_properties_in_azures_order(go_server: ServerProcess, http: BlobHttp, box: str) -> None:
    """TestContainerListBlobsIncludeMultipleImpl: a copied blob is listed (``include=copy``) with
    CopyId, CopySource, CopyStatus, CopyProgress, CopyCompletionTime in that order, between
    LeaseState and ServerEncrypted; the SDK reads them."""
    assert http.request("PUT", f"/{box}/z", {"x-ms-blob-type": "BlockBlob"}, b"GoBlockBlobData").status == 201
    source = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/z"
    copied = http.request("PUT", f"/{box}/copyz", {"x-ms-copy-source": source})
    assert copied.status == 202
    listed = http.request(
        "GET", f"/{box}?restype=container&comp=list&include=copy", {"x-ms-version": GO_VERSION}
    )
    copy_id = copied.headers["x-ms-copy-id"]
    expected = (
        f"<LeaseState>available</LeaseState><CopyId>{copy_id}</CopyId><CopySource>{source}</CopySource>"
        "<CopyStatus>success</CopyStatus><CopyProgress>15/15</CopyProgress><CopyCompletionTime>"
    )
    assert expected.encode() in listed.body
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        blobs = {b.name: b for b in service.get_container_client(box).list_blobs(include=["copy"])}
    assert (blobs["copyz"].copy.status, blobs["copyz"].copy.source) == ("success", source)


@pytest.mark.parametrize(
    "condition",
    [
        {"If-Match": '"0x8DC76585BBE140F"'},
        {"If-None-Match": "{etag}"},
        {"If-Modified-Since": "Fri, 11 Jun 2049 20:00:00 GMT"},
        {"If-Unmodified-Since": "Fri, 11 Jun 2021 20:00:00 GMT"},
    ],
)
def test_copy_blob_destination_conditions_unmet(
    go_server: ServerProcess, http: BlobHttp, box: str, condition: dict[str, str]
) -> None:
    """TestBlobStartCopyDest{IfMatch,IfNoneMatch,IfModifiedSince,IfUnmodifiedSince}False: Copy Blob
    onto a blob whose conditions are unmet is 412 TargetConditionNotMet, "The target condition
    specified using HTTP conditional header(s) is not met." (265 bytes); the destination stays."""
    assert (
        http.request("PUT", f"/{box}/src", {"x-ms-blob-type": "BlockBlob"}, b"GoBlockBlobData").status == 201
    )
    made = http.request("PUT", f"/{box}/dest", {"x-ms-blob-type": "BlockBlob"}, b"x")
    headers = {name: value.format(etag=made.headers["etag"]) for name, value in condition.items()}
    source = f"http://127.0.0.1:{go_server.blob_port}/{DEV_ACCOUNT}/{box}/src"
    refused = http.request("PUT", f"/{box}/dest", {"x-ms-copy-source": source, **headers})
    assert (refused.status, refused.code, len(refused.body)) == (412, "TargetConditionNotMet", 265)
    assert http.request("GET", f"/{box}/dest").body == b"x"


def test_copy_blob_destination_etag_unmet_through_the_sdk(go_server: ServerProcess, box: str) -> None:
    """TestBlobStartCopyDestIfMatchFalse through the Python SDK (sync and aio)."""
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        container = service.get_container_client(box)
        source = container.get_blob_client("src")
        source.upload_blob(b"GoBlockBlobData")
        target = container.get_blob_client("dest")
        target.upload_blob(b"x")
        with pytest.raises(HttpResponseError) as caught:
            target.start_copy_from_url(
                source.url, etag='"0x1"', match_condition=MatchConditions.IfNotModified
            )
        assert (caught.value.status_code, caught.value.error_code) == (412, "TargetConditionNotMet")

    async def copy_async() -> str | None:
        async with AsyncBlobServiceClient.from_connection_string(go_server.connection_string) as service:
            target = service.get_blob_client(box, "dest")
            try:
                await target.start_copy_from_url(
                    source.url, if_unmodified_since=datetime(2021, 6, 11, tzinfo=UTC)
                )
            except HttpResponseError as error:
                return error.error_code
            return None

    assert asyncio.run(copy_async()) == "TargetConditionNotMet"


def test_the_sdk_reads_the_retention_code(go_server: ServerProcess) -> None:
    """The Python SDK's retention policy of 0 or 366 days meets the same document error."""
    with BlobServiceClient.from_connection_string(go_server.connection_string) as service:
        for days in (0, 366):
            with pytest.raises(HttpResponseError) as caught:
                service.set_service_properties(
                    delete_retention_policy=RetentionPolicy(enabled=True, days=days)
                )
            assert (caught.value.status_code, caught.value.error_code) == (400, "InvalidXmlDocument")


def test_an_identifier_without_id_is_refused_where_the_reader_stood(http: BlobHttp, box: str) -> None:
    """go/sdk/storage/azdatalake/testdata/recordings/Test/TestFilesystemSetAccessPolicyWithNullId.json
    (x-ms-version 2023-11-03): Set Container ACL with an identifier without ``Id`` is 400
    ``InvalidXmlDocument`` at line 2, position 115 (the name in the ``</SignedIdentifiers>`` after
    it), reason "Signed identifier ID cannot be empty or over 64 characters in length" (371 bytes),
    as Set Queue ACL answers; the container keeps no policy."""
    headers = {"x-ms-version": GO_VERSION, "Content-Type": "application/xml"}
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<SignedIdentifiers><SignedIdentifier><AccessPolicy>'
        "<Permission>rw</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>"
    )
    answer = http.request("PUT", f"/{box}?comp=acl&restype=container", headers, body.encode())
    assert (answer.status, answer.code) == (400, "InvalidXmlDocument"), answer
    fields = answer.error_fields()
    assert (fields["LineNumber"], fields["LinePosition"]) == ("2", "115")
    assert fields["Reason"] == "Signed identifier ID cannot be empty or over 64 characters in length"
    assert answer.headers["content-length"] == "371"
    acl = http.request("GET", f"/{box}?comp=acl&restype=container", {"x-ms-version": GO_VERSION})
    assert acl.body.endswith(b"<SignedIdentifiers />")
    one = body.replace("<SignedIdentifier>", f"<SignedIdentifier><Id>{'a' * 64}</Id>")
    assert http.request("PUT", f"/{box}?comp=acl&restype=container", headers, one.encode()).status == 200
