"""Blob answers compared with Azure's recordings of the .NET SDK's Blob tests, a second pass
(``net/sdk/storage/Azure.Storage.Blobs/tests/SessionRecords/`` in Azure/azure-sdk-assets),
sent over raw HTTP as the .NET client sent them and read back through the Python SDK where it
can express the request. Each test names its recording and x-ms-version."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import BlobServiceClient, ContainerSasPermissions, generate_container_sas

from tests.backends import backend_names
from tests.blob.test_blob_batch import batch_body, signed_subrequest
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess

NET_VERSION = "2024-08-04"
_names = itertools.count()


@pytest.fixture(scope="module", params=backend_names())
def net_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server on each backend, as the recording accounts (versions kept, version-level
    immutability supported)."""
    extra = [*fresh_store(request.param), "--blob-versioning", "--version-level-immutability"]
    process = ServerProcess(tmp_path_factory.mktemp("netrec2"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def http(net_server: ServerProcess) -> BlobHttp:
    return BlobHttp(net_server.blob_port)


@pytest.fixture
def box(http: BlobHttp) -> str:
    """A new container's name."""
    return http.new_container("netc")


def _net(headers: dict[str, str] | None = None) -> dict[str, str]:
    return {"x-ms-version": NET_VERSION, **(headers or {})}


def test_put_block_with_an_id_that_is_no_base64(net_server: ServerProcess, http: BlobHttp, box: str) -> None:
    """BlockBlobClientTests/StageBlockAsync_Error.json (x-ms-version 2024-08-04): Put Block with
    ``blockid=test-block-02210587-...`` is 400 InvalidQueryParameterValue naming the parameter and
    its value, with the Reason 'Not a valid base64 string.' (454 bytes in all). Raw HTTP only: the
    Python SDK encodes the id it is given."""
    block_id = "test-block-02210587-84f7-1e95-bf52-77866712a343"
    answer = http.request("PUT", f"/{box}/b?comp=block&blockid={block_id}", _net(), b"x" * 4096)
    assert answer.status == 400
    assert answer.code == "InvalidQueryParameterValue"
    assert answer.error_fields()["Reason"] == "Not a valid base64 string."
    assert answer.error_fields()["QueryParameterValue"] == block_id
    assert answer.headers["content-length"] == "454"  # as recorded


def test_anonymous_find_blobs_by_tags_has_a_line_break(http: BlobHttp) -> None:
    """ServiceClientTests/FindBlobsByTagAsync_Error.json (x-ms-version 2024-08-04): an anonymous
    Find Blobs by Tags is 401 NoAuthenticationInformation with the bearer challenge, its body
    with a line break after the XML declaration (303 bytes); Get Service Properties
    (GetPropertiesAsync_Error, 2024-08-04) and Get Account Information (GetAccountInfoAsync_Error,
    2025-05-05) refused alike have none (302 bytes)."""
    where = "/?comp=blobs&where=%22key%22%20%3D%20%27value%27"
    found = http.request("GET", where, _net({"Accept": "application/xml"}), signed=False)
    assert (found.status, found.code) == (401, "NoAuthenticationInformation")
    assert found.headers["www-authenticate"].startswith("Bearer authorization_uri=")
    assert found.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
    assert found.headers["content-length"] == "303"  # as recorded
    for path, version in (
        ("/?restype=service&comp=properties", NET_VERSION),
        ("/?restype=account&comp=properties", "2025-05-05"),
    ):
        other = http.request("GET", path, {"x-ms-version": version}, signed=False)
        assert (other.status, other.code) == (401, "NoAuthenticationInformation")
        assert other.headers["content-length"] == "302"  # as recorded


def test_immutability_and_legal_hold_errors_have_a_line_break(http: BlobHttp, box: str) -> None:
    """ImmutableStorageWithVersioningTests: Set Blob Immutability Policy of a blob that does not
    exist (SetImmutibilityPolicyAsync_Error.json, x-ms-version 2026-06-06), Delete Blob
    Immutability Policy (DeleteImmutibilityPolicyAsync_Error.json, 2024-08-04) and Set Blob Legal
    Hold (SetLegalHoldAsync_Error.json, 2024-08-04) are 404 BlobNotFound of 216 bytes, a line break
    after the XML declaration; an unmet If-Unmodified-Since
    (SetImmutibilityPolicyAsync_IfModifiedSince_Failed.json, 2026-06-06) is 412 ConditionNotMet
    of 253 bytes, broken alike."""
    until = "Tue, 30 Jun 2099 19:52:02 GMT"
    policy = {"x-ms-immutability-policy-mode": "locked", "x-ms-immutability-policy-until-date": until}
    attempts = [
        ("PUT", "comp=immutabilityPolicies", {"x-ms-version": "2026-06-06", **policy}),
        ("DELETE", "comp=immutabilityPolicies", _net()),
        ("PUT", "comp=legalhold", _net({"x-ms-legal-hold": "true"})),
    ]
    for method, query, headers in attempts:
        missing = http.request(method, f"/{box}/missing?{query}", headers)
        assert (missing.status, missing.code) == (404, "BlobNotFound"), query
        assert missing.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
        assert missing.headers["content-length"] == "216"  # as recorded
    assert http.request("PUT", f"/{box}/kept", {"x-ms-blob-type": "BlockBlob"}, b"x").status == 201
    unmet = http.request(
        "PUT",
        f"/{box}/kept?comp=immutabilityPolicies",
        {"x-ms-version": "2026-06-06", "If-Unmodified-Since": "Mon, 29 Jun 2026 19:51:58 GMT", **policy},
    )
    assert (unmet.status, unmet.code) == (412, "ConditionNotMet")
    assert unmet.headers["content-length"] == "253"  # as recorded


def test_listing_places_immutability_after_server_encrypted(http: BlobHttp, box: str) -> None:
    """ImmutableStorageWithVersioningTests/SetImmutibilityPolicyAsync.json (x-ms-version
    2026-06-06): Set Blob Immutability Policy answers the mode and date, and List Blobs with
    ``include=Immutabilitypolicy`` writes ``<ImmutabilityPolicyUntilDate>`` and
    ``<ImmutabilityPolicyMode>`` after ``<ServerEncrypted>``, last in ``<Properties>``;
    SetLegalHoldAsync.json (2024-08-04) places ``<LegalHold>`` there too."""
    version = {"x-ms-version": "2026-06-06"}
    assert (
        http.request("PUT", f"/{box}/held", {"x-ms-blob-type": "BlockBlob", **version}, b"x" * 1024).status
        == 201
    )
    until = "Tue, 30 Jun 2099 19:56:57 GMT"
    policy = {"x-ms-immutability-policy-mode": "unlocked", "x-ms-immutability-policy-until-date": until}
    placed = http.request("PUT", f"/{box}/held?comp=immutabilityPolicies", {**version, **policy})
    assert placed.status == 200
    assert placed.headers["x-ms-immutability-policy-mode"] == "unlocked"
    assert placed.headers["x-ms-immutability-policy-until-date"] == until
    listed = http.request(
        "GET", f"/{box}?restype=container&comp=list&prefix=held&include=Immutabilitypolicy", version
    )
    assert listed.status == 200
    assert (
        b"<LeaseState>available</LeaseState><ServerEncrypted>true</ServerEncrypted>"
        b"<ImmutabilityPolicyUntilDate>" + until.encode() + b"</ImmutabilityPolicyUntilDate>"
        b"<ImmutabilityPolicyMode>unlocked</ImmutabilityPolicyMode></Properties><OrMetadata /></Blob>"
    ) in listed.body
    held = http.request("PUT", f"/{box}/held?comp=legalhold", {**version, "x-ms-legal-hold": "true"})
    assert held.status == 200
    both = http.request(
        "GET", f"/{box}?restype=container&comp=list&include=immutabilitypolicy,legalhold", version
    )
    assert b"<ServerEncrypted>true</ServerEncrypted><ImmutabilityPolicyUntilDate>" in both.body
    assert b"</ImmutabilityPolicyMode><LegalHold>true</LegalHold></Properties>" in both.body


def _batch(boundary: str, subrequests: list[str]) -> bytes:
    parts = [
        f"--{boundary}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
        f"Content-ID: {index}\r\n\r\n{sub}"
        for index, sub in enumerate(subrequests)
    ]
    return ("".join(parts) + f"--{boundary}--\r\n").encode()


def test_blob_batch_refusals_have_a_line_break(http: BlobHttp, box: str) -> None:
    """Azure.Storage.Blobs.Batch's BlobBatchClientTests (x-ms-version 2024-08-04): an anonymous
    batch (Delete_Error.json) is 401 NoAuthenticationInformation of 303 bytes, and a batch at the
    account's URL under a container SAS (Batch_SasUri_NotOwner.json) 403 AuthenticationFailed of
    444 bytes: both with a line break after the XML declaration."""
    boundary = "batch_6d394194-b221-db95-2513-696e1090dcc4"
    body = _batch(
        boundary, ["DELETE /container/blob HTTP/1.1\r\nAccept: application/xml\r\nContent-Length: 0\r\n\r\n"]
    )
    headers = _net({"Content-Type": f"multipart/mixed; boundary={boundary}", "Accept": "application/xml"})
    anonymous = http.request("POST", "/?comp=batch", headers, body, signed=False)
    assert (anonymous.status, anonymous.code) == (401, "NoAuthenticationInformation")
    assert anonymous.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
    assert anonymous.headers["content-length"] == "303"  # as recorded
    token = generate_container_sas(
        DEV_ACCOUNT,
        box,
        account_key=DEV_KEY,
        permission=ContainerSasPermissions(
            read=True, add=True, create=True, write=True, delete=True, list=True
        ),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    subs = [
        f"DELETE /{DEV_ACCOUNT}/{box}/blob{n}?{token} HTTP/1.1\r\nContent-Length: 0\r\n\r\n" for n in (1, 2)
    ]
    refused = http.request("POST", f"/?{token}&comp=batch", headers, _batch(boundary, subs), signed=False)
    assert (refused.status, refused.code) == (403, "AuthenticationFailed")
    assert refused.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error>')
    assert refused.headers["content-length"] == "444"  # as recorded


def test_blob_batch_error_part_has_a_byte_order_mark_and_a_line_break(
    net_server: ServerProcess, http: BlobHttp, box: str
) -> None:
    """BlobBatchClientTests/Delete_OneFails.json (x-ms-version 2024-08-04): a batch of three
    deletes whose third names a container that does not exist answers 202, the third part
    ``HTTP/1.1 404 The specified container does not exist.`` with ContainerNotFound and a body of
    226 bytes: a byte order mark, the XML declaration and a line break. The SDK reads it."""
    for name in ("blob1", "blob2"):
        assert http.request("PUT", f"/{box}/{name}", {"x-ms-blob-type": "BlockBlob"}, b"x").status == 201
    paths = [
        f"/{DEV_ACCOUNT}/{box}/blob1",
        f"/{DEV_ACCOUNT}/{box}/blob2",
        f"/{DEV_ACCOUNT}/invalidcontainer/blob3",
    ]
    subs = [signed_subrequest(net_server, "DELETE", path) for path in paths]
    answer = http.request(
        "POST",
        "/?comp=batch",
        _net({"Content-Type": "multipart/mixed; boundary=batch_x"}),
        batch_body("batch_x", subs),
    )
    assert answer.status == 202
    boundary = answer.headers["content-type"].split("boundary=", 1)[1].encode()
    third = answer.body.split(b"--" + boundary)[3]
    _, _, body = third.strip(b"\r\n").partition(b"\r\n\r\n")
    sub_head, _, sub_body = body.partition(b"\r\n\r\n")
    assert sub_head.startswith(b"HTTP/1.1 404 The specified container does not exist.\r\n")
    assert b"x-ms-error-code: ContainerNotFound\r\n" in sub_head
    assert b"Content-Length: 226\r\n" in sub_head  # as recorded
    assert sub_body.startswith(
        b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error><Code>ContainerNotFound'
    )
    assert len(sub_body) == 226
    service = BlobServiceClient.from_connection_string(net_server.connection_string)
    assert http.request("PUT", f"/{box}/blob3", {"x-ms-blob-type": "BlockBlob"}, b"x").status == 201
    results = list(
        service.get_container_client(box).delete_blobs("blob3", "missing", raise_on_any_failure=False)
    )
    assert [r.status_code for r in results] == [202, 404]


@pytest.fixture(scope="module", params=backend_names())
def soft_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server whose account keeps deleted containers a day, on each backend."""
    extra = [*fresh_store(request.param), "--container-soft-delete", "1"]
    process = ServerProcess(tmp_path_factory.mktemp("netrec2soft"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


def test_deleted_container_listed_leased_with_its_properties(soft_server: ServerProcess) -> None:
    """ServiceClientTests/ListContainersSegmentAsync_Deleted.json (x-ms-version 2024-08-04): List
    Containers with ``include=deleted`` shows a soft-deleted container with its ``<Etag>``, as
    leased for good (``locked``, ``leased``, ``fixed``), its encryption scope and immutability
    elements, then ``<DeletedTime>`` and ``<RemainingRetentionDays>``. The SDK reads the lease."""
    http = BlobHttp(soft_server.blob_port)
    name = f"netdel{next(_names)}x"
    assert http.request("PUT", f"/{name}?restype=container", _net()).status == 201
    assert http.request("DELETE", f"/{name}?restype=container", _net()).status == 202
    listed = http.request("GET", f"/?comp=list&include=deleted&prefix={name}", _net())
    assert listed.status == 200
    body = listed.body.decode()
    properties = body.split("<Properties>", 1)[1].split("</Properties>", 1)[0]
    tags = [part.split(">", 1)[0] for part in properties.split("<")[1:] if not part.startswith("/")]
    assert tags == [
        "Last-Modified",
        "Etag",
        "LeaseStatus",
        "LeaseState",
        "LeaseDuration",
        "DefaultEncryptionScope",
        "DenyEncryptionScopeOverride",
        "HasImmutabilityPolicy",
        "HasLegalHold",
        "ImmutableStorageWithVersioningEnabled",
        "DeletedTime",
        "RemainingRetentionDays",
    ]
    assert (
        "<LeaseStatus>locked</LeaseStatus><LeaseState>leased</LeaseState><LeaseDuration>fixed</LeaseDuration>"
        in properties
    )
    service = BlobServiceClient.from_connection_string(soft_server.connection_string)
    [found] = [c for c in service.list_containers(name_starts_with=name, include_deleted=True)]
    assert found.deleted and found.lease.status == "locked" and found.lease.state == "leased"
    assert found.etag.startswith('"0x')


_ALL_METHODS = "GET,HEAD,POST,PUT,DELETE,TRACE,OPTIONS,CONNECT,MERGE,PATCH"
_SENT_PROPERTIES = (
    "\ufeff<StorageServiceProperties><Logging><Version>1.0</Version><Delete>false</Delete><Read>false</Read>"
    "<Write>false</Write><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging><HourMetrics>"
    "<Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy>"
    "</HourMetrics><MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false"
    "</Enabled></RetentionPolicy></MinuteMetrics><DefaultServiceVersion>2018-03-28</DefaultServiceVersion>"
    "<DeleteRetentionPolicy><Enabled>false</Enabled><AllowPermanentDelete>false</AllowPermanentDelete>"
    "</DeleteRetentionPolicy>{website}<Cors><CorsRule><AllowedOrigins>*</AllowedOrigins><AllowedMethods>"
    f"{_ALL_METHODS}</AllowedMethods><AllowedHeaders>*</AllowedHeaders><ExposedHeaders>*</ExposedHeaders>"
    "<MaxAgeInSeconds>86400</MaxAgeInSeconds></CorsRule></Cors></StorageServiceProperties>"
)
_WEBSITE = (
    "<StaticWebsite><Enabled>true</Enabled><ErrorDocument404Path>error/404.html</ErrorDocument404Path>"
    "<DefaultIndexDocumentPath>index.html</DefaultIndexDocumentPath></StaticWebsite>"
)
_READ_BACK = (
    '\ufeff<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><Logging><Version>1.0</Version>'
    "<Read>false</Read><Write>false</Write><Delete>false</Delete><RetentionPolicy><Enabled>false</Enabled>"
    "</RetentionPolicy></Logging><HourMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy>"
    "<Enabled>false</Enabled></RetentionPolicy></HourMetrics><MinuteMetrics><Version>1.0</Version><Enabled>false"
    "</Enabled><RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics><Cors><CorsRule>"
    f"<AllowedMethods>{_ALL_METHODS}</AllowedMethods><AllowedOrigins>*</AllowedOrigins><AllowedHeaders>*"
    "</AllowedHeaders><ExposedHeaders>*</ExposedHeaders><MaxAgeInSeconds>86400</MaxAgeInSeconds></CorsRule>"
    "</Cors><DeleteRetentionPolicy><Enabled>false</Enabled><AllowPermanentDelete>false</AllowPermanentDelete>"
    f"</DeleteRetentionPolicy>{_WEBSITE}<DefaultServiceVersion>2018-03-28</DefaultServiceVersion>"
    "</StorageServiceProperties>"
)


def test_cors_rule_may_allow_connect_and_trace(http: BlobHttp) -> None:
    """ServiceClientTests/SetPropertiesAsync_StaticWebsite.json (x-ms-version 2024-08-04): Set
    Blob Service Properties with a CORS rule allowing GET,HEAD,POST,PUT,DELETE,TRACE,OPTIONS,
    CONNECT,MERGE,PATCH and a static website is 202, and Get Blob Service Properties reads back the
    recorded document, the methods in the order sent. The recording then turns the website off."""
    headers = _net({"Content-Type": "application/xml"})
    put = http.request(
        "PUT",
        "/?restype=service&comp=properties",
        headers,
        _SENT_PROPERTIES.format(website=_WEBSITE).encode(),
    )
    assert put.status == 202, put.body
    read = http.request("GET", "/?restype=service&comp=properties", _net())
    assert read.body.decode() == _READ_BACK
    off = _SENT_PROPERTIES.format(website="<StaticWebsite><Enabled>false</Enabled></StaticWebsite>")
    assert http.request("PUT", "/?restype=service&comp=properties", headers, off.encode()).status == 202
