"""Blob answers compared with Azure's recordings of the Java SDK's tests
(``java/sdk/storage/azure-storage-blob/src/test/resources/session-records/`` in
Azure/azure-sdk-assets), sent over raw HTTP as the Java client sent them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient, CorsRule

from tests.blobhttp import BlobHttp, cors_rules
from tests.serverproc import ServerProcess

BOM_DECLARATION_BREAK = b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<Error><Code>'
JAVA_EMPTY_TAGS = b"<?xml version='1.0' encoding='UTF-8'?><Tags><TagSet/></Tags>"


def test_blob_tags_errors_break_after_the_declaration(
    server: ServerProcess, container: ContainerClient
) -> None:
    """Set Blob Tags on a missing blob (BlobApiTests.setTagsError, x-ms-version 2023-08-03: 404
    BlobNotFound, Content-Length 216), with a lease id on an unleased blob (setTagsLeaseFail: 412
    LeaseNotPresentWithBlobOperation) and Get Blob Tags whose x-ms-if-tags fails (getTagsACFail:
    412 ConditionNotMet, 253): the document has a line break after the XML declaration."""
    http = BlobHttp(server.blob_port)
    name = container.container_name
    container.get_blob_client("b").upload_blob(b"default")
    missing = http.request(
        "PUT", f"/{name}/missing?comp=tags", {"Content-Type": "application/xml"}, JAVA_EMPTY_TAGS
    )
    assert (missing.status, missing.code, len(missing.body)) == (404, "BlobNotFound", 216)
    assert missing.body.startswith(BOM_DECLARATION_BREAK + b"BlobNotFound</Code>")
    lease = http.request(
        "PUT",
        f"/{name}/b?comp=tags",
        {"Content-Type": "application/xml", "x-ms-lease-id": "552470d5-167e-4f7d-a142-752ff54f9f93"},
        b"<?xml version='1.0' encoding='UTF-8'?><Tags><TagSet><Tag><Key>foo</Key><Value>bar</Value></Tag>"
        b"</TagSet></Tags>",
    )
    assert (lease.status, lease.code) == (412, "LeaseNotPresentWithBlobOperation")
    assert lease.body.startswith(BOM_DECLARATION_BREAK + b"LeaseNotPresentWithBlobOperation</Code>")
    unmet = http.request("GET", f"/{name}/b?comp=tags", {"x-ms-if-tags": "\"foo\" = 'bar'"})
    assert (unmet.status, unmet.code, len(unmet.body)) == (412, "ConditionNotMet", 253)
    assert unmet.body.startswith(BOM_DECLARATION_BREAK + b"ConditionNotMet</Code>")
    plain = http.request("GET", f"/{name}/missing")  # other operations keep no break
    assert plain.body.startswith(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><Error>')


def test_restore_missing_container_breaks_after_the_declaration(server: ServerProcess) -> None:
    """Restore Container of a container never deleted: 404 ContainerNotFound with a line break
    after the declaration (ServiceApiTests.restoreContainerError, Content-Length 226)."""
    http = BlobHttp(server.blob_port)
    name = "javarestoreerror"
    reply = http.request(
        "PUT",
        f"/{name}?restype=container&comp=undelete",
        {"x-ms-deleted-container-name": name, "x-ms-deleted-container-version": "01D60F8BB59A4652"},
    )
    assert (reply.status, reply.code, len(reply.body)) == (404, "ContainerNotFound", 226)
    assert reply.body.startswith(BOM_DECLARATION_BREAK + b"ContainerNotFound</Code>")


def test_seal_errors_break_after_the_declaration(server: ServerProcess, container: ContainerClient) -> None:
    """Append Blob Seal of a missing blob (AppendBlobApiTests.sealError, x-ms-version 2024-08-04:
    404 BlobNotFound, 216), with another lease id than the blob's (sealACFail[5]: 412
    LeaseIdMismatchWithBlobOperation, 265) and an unmet append position (sealACFail[6]: 412
    AppendPositionConditionNotMet): a line break after the XML declaration."""
    http = BlobHttp(server.blob_port)
    name = container.container_name
    missing = http.request("PUT", f"/{name}/missing?comp=seal")
    assert (missing.status, missing.code, len(missing.body)) == (404, "BlobNotFound", 216)
    assert missing.body.startswith(BOM_DECLARATION_BREAK)
    assert http.request("PUT", f"/{name}/ab", {"x-ms-blob-type": "AppendBlob"}).status == 201
    position = http.request("PUT", f"/{name}/ab?comp=seal", {"x-ms-blob-condition-appendpos": "1"})
    assert (position.status, position.code) == (412, "AppendPositionConditionNotMet")
    assert position.body.startswith(BOM_DECLARATION_BREAK)
    acquired = http.request(
        "PUT", f"/{name}/ab?comp=lease", {"x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1"}
    )
    assert acquired.status == 201
    other = http.request(
        "PUT", f"/{name}/ab?comp=seal", {"x-ms-lease-id": "cd317405-a951-4983-be36-00a2500d2970"}
    )
    assert (other.status, other.code, len(other.body)) == (412, "LeaseIdMismatchWithBlobOperation", 265)
    assert other.body.startswith(BOM_DECLARATION_BREAK)


def test_unknown_account_detail(server: ServerProcess) -> None:
    """A request for an account the server does not serve: 403 AuthenticationFailed whose detail
    names the account as Azure's does (ServiceApiTests.setPropsError, x-ms-version 2023-08-03,
    Set Blob Service Properties with the Java SDK's body)."""
    http = BlobHttp(server.blob_port)
    http.base = f"http://127.0.0.1:{server.blob_port}/primt6eec3df887974152"
    reply = http.request(
        "PUT",
        "/?restype=service&comp=properties",
        {"Content-Type": "application/xml"},
        b"<?xml version='1.0' encoding='UTF-8'?><StorageServiceProperties><Cors/></StorageServiceProperties>",
    )
    assert (reply.status, reply.code) == (403, "AuthenticationFailed")
    assert reply.error_fields()["AuthenticationErrorDetail"] == (
        "Cannot find the claimed account when trying to GetProperties for the account primt6eec3df887974152."
    )


def test_query_errors_break_after_the_declaration(server: ServerProcess, container: ContainerClient) -> None:
    """Query Blob Contents of a missing blob: 404 BlobNotFound, Content-Length 216, a line break
    after the declaration (BlobBaseApiTests.queryError, x-ms-version 2023-08-03, its body)."""
    http = BlobHttp(server.blob_port)
    body = (
        b"<?xml version='1.0' encoding='UTF-8'?><QueryRequest><QueryType>SQL</QueryType>"
        b"<Expression>SELECT * from BlobStorage</Expression></QueryRequest>"
    )
    reply = http.request(
        "POST", f"/{container.container_name}/missing?comp=query", {"Content-Type": "application/xml"}, body
    )
    assert (reply.status, reply.code, len(reply.body)) == (404, "BlobNotFound", 216)
    assert reply.body.startswith(BOM_DECLARATION_BREAK)


def test_page_ranges_errors_break_after_the_declaration(
    server: ServerProcess, container: ContainerClient
) -> None:
    """Get Page Ranges of a missing blob (PageBlobApiTests.getPageRangesError, x-ms-version
    2023-08-03: 404 BlobNotFound, 216) and with an unreadable prevsnapshot
    (getPageRangesDiffError: 400 InvalidQueryParameterValue, 378): a line break after the
    declaration."""
    http = BlobHttp(server.blob_port)
    name = container.container_name
    missing = http.request("GET", f"/{name}/missing?comp=pagelist")
    assert (missing.status, missing.code, len(missing.body)) == (404, "BlobNotFound", 216)
    assert missing.body.startswith(BOM_DECLARATION_BREAK)
    diff = http.request("GET", f"/{name}/missing?comp=pagelist&prevsnapshot=snapshot")
    assert (diff.status, diff.code, len(diff.body)) == (400, "InvalidQueryParameterValue", 378)
    assert diff.body.startswith(BOM_DECLARATION_BREAK)
    assert diff.error_fields()["QueryParameterName"] == "prevsnapshot"


COPY_SOURCE_HEADERS = ("x-ms-copy-source-status-code", "x-ms-copy-source-error-code")


def test_copy_source_described_only_from_2024_08_04(
    server: ServerProcess, container: ContainerClient
) -> None:
    """Copy Blob From URL of a private blob of the same account: at x-ms-version 2023-08-03 Azure
    answered 401 CannotVerifyCopySource in the source's words and nothing else of the source's,
    297 bytes (BlobApiTests.syncCopyError), where at 2024-08-04 it names the source's status and
    code in headers and the document, 570 bytes (the .NET SDK's
    BlobBaseClientTests/SyncCopyFromUriAsync_Error). Append Block From URL whose
    x-ms-source-if-modified-since the public source does not meet: a bare 304 without the
    source's headers at 2023-08-03 (AppendBlobApiTests.appendBlockFromURLSourceACFail[1])."""
    http = BlobHttp(server.blob_port)
    name = container.container_name
    assert http.request("PUT", f"/{name}/src", {"x-ms-blob-type": "BlockBlob"}, b"default").status == 201
    source = f"{http.base}/{name}/src"
    copy = {"x-ms-copy-source": source, "x-ms-requires-sync": "true"}
    old = http.request("PUT", f"/{name}/dst", {**copy, "x-ms-version": "2023-08-03"})
    assert (old.status, old.code, len(old.body)) == (401, "CannotVerifyCopySource", 297)
    assert not any(header in old.headers for header in COPY_SOURCE_HEADERS)
    assert list(old.error_fields()) == ["Code", "Message"]
    said = (
        "Server failed to authenticate the request. Please refer to the information in the www-authenticate"
    )
    assert old.error_fields()["Message"].startswith(said + " header.")
    new = http.request("PUT", f"/{name}/dst", {**copy, "x-ms-version": "2024-08-04"})
    assert (new.status, new.code, len(new.body)) == (401, "CannotVerifyCopySource", 570)
    assert [new.headers[header] for header in COPY_SOURCE_HEADERS] == ["401", "NoAuthenticationInformation"]

    public = http.request(
        "PUT", f"/{name}?restype=container&comp=acl", {"x-ms-blob-public-access": "container"}
    )
    assert public.status == 200
    assert http.request("PUT", f"/{name}/ab", {"x-ms-blob-type": "AppendBlob"}).status == 201
    unmet = {
        "x-ms-copy-source": source,
        "x-ms-source-if-modified-since": "Fri, 13 Oct 2090 17:25:55 GMT",
        "x-ms-source-range": "bytes=0-",
    }
    bare = http.request("PUT", f"/{name}/ab?comp=appendblock", {**unmet, "x-ms-version": "2023-08-03"})
    assert (bare.status, bare.code, bare.body) == (304, "CannotVerifyCopySource", b"")
    assert not any(header in bare.headers for header in COPY_SOURCE_HEADERS)
    assert "content-length" not in bare.headers  # and no Content-Length (also at 2026-04-06, Rust)
    etag = http.request("HEAD", f"/{name}/src").headers["etag"]
    unchanged = http.request("GET", f"/{name}/src", {"If-None-Match": etag, "x-ms-version": "2023-08-03"})
    assert (unchanged.status, unchanged.headers["content-length"]) == (304, "0")  # downloadACFail[4]
    told = http.request("PUT", f"/{name}/ab?comp=appendblock", {**unmet, "x-ms-version": "2024-08-04"})
    assert (told.status, told.headers.get("x-ms-copy-source-status-code")) == (304, "304")


def test_stats_refused_on_the_primary(server: ServerProcess) -> None:
    """Get Blob Service Stats at the primary endpoint: 400 InvalidQueryParameterValue naming comp
    and stats with an empty Reason, 376 bytes (ServiceApiTests.getStatsError, x-ms-version
    2023-08-03, sent with Content-Length: 0 as the Java client sends it); the secondary answers."""
    http = BlobHttp(server.blob_port)
    java = {"Content-Length": "0", "x-ms-version": "2023-08-03"}
    primary = http.request("GET", "/?restype=service&comp=stats", java)
    assert (primary.status, primary.code, len(primary.body)) == (400, "InvalidQueryParameterValue", 376)
    assert primary.error_fields() | {"Message": ""} == {
        "Code": "InvalidQueryParameterValue",
        "Message": "",
        "QueryParameterName": "comp",
        "QueryParameterValue": "stats",
        "Reason": "",
    }
    assert primary.body.endswith(b"<Reason /></Error>")
    secondary = BlobHttp(server.blob_port)
    secondary.base += "-secondary"
    stats = secondary.request("GET", "/?restype=service&comp=stats", java)
    assert stats.status == 200 and b"<Status>live</Status>" in stats.body


JAVA_RULE = CorsRule(
    ["*"],
    ["GET", "PUT", "HEAD"],
    allowed_headers=["x-ms-version"],
    exposed_headers=["x-ms-client-request-id"],
)


@pytest.fixture
def java_cors(blob_service: BlobServiceClient) -> Iterator[None]:
    """The CORS rule of the account the Java SDK's recordings were made on (read back in
    ServiceApiTests.setPropsStaticWebsite), restored afterwards."""
    with cors_rules(blob_service, [JAVA_RULE], settle=1.2):  # other workers re-read within a second
        yield


@pytest.mark.usefixtures("java_cors")
def test_request_without_origin_exposes_the_rules_headers(
    server: ServerProcess, container: ContainerClient
) -> None:
    """A request without Origin under a '*' rule exposing x-ms-client-request-id: Azure's GETs
    answer 'Access-Control-Allow-Origin: *' and 'Access-Control-Expose-Headers:
    x-ms-client-request-id', that list alone (ServiceApiTests.setPropsStaticWebsite: Get Blob
    Service Properties; BlobApiTests.downloadEmptyFile: Get Blob; ServiceApiTests.getStatsError
    and ContainerApiTests.getPropertiesLeaseFail: 400s; x-ms-version 2023-08-03); its PUTs carry
    no CORS headers (the same recordings' Create Container and Set Blob Service Properties)."""
    http = BlobHttp(server.blob_port)
    java = {"Content-Length": "0", "x-ms-version": "2023-08-03"}
    name = container.container_name
    put = http.request(
        "PUT", f"/{name}/empty", {"x-ms-blob-type": "AppendBlob", "x-ms-version": "2023-08-03"}
    )
    assert put.status == 201 and "access-control-allow-origin" not in put.headers
    for path in ("/?restype=service&comp=properties", f"/{name}/empty", f"/{name}?restype=container"):
        reply = http.request("GET", path, java)
        assert reply.status == 200, (path, reply)
        assert reply.headers["access-control-allow-origin"] == "*"
        assert reply.headers["access-control-expose-headers"] == "x-ms-client-request-id"
    leased = http.request("GET", f"/{name}?restype=container", {**java, "x-ms-lease-id": "garbage"})
    assert (leased.status, leased.code, len(leased.body)) == (400, "InvalidHeaderValue", 326)
    assert leased.headers["access-control-expose-headers"] == "x-ms-client-request-id"
    browser = http.request("GET", f"/{name}/empty", {**java, "Origin": "https://app.example"})
    assert "x-ms-request-id" in browser.headers["access-control-expose-headers"].split(",")  # as before


def test_find_blobs_unparsable_where(server: ServerProcess) -> None:
    """Find Blobs by Tags with where=garbageTag: 400 InvalidQueryParameterValue, "Error parsing
    query at or near character position 1: expected an operator", naming where, its value and
    the Reason 'This query parameter value is invalid.', a line break after the declaration, 423
    bytes (ServiceApiTests.findBlobsError, x-ms-version 2023-08-03)."""
    http = BlobHttp(server.blob_port)
    reply = http.request(
        "GET", "/?comp=blobs&where=garbageTag", {"Content-Length": "0", "x-ms-version": "2023-08-03"}
    )
    assert (reply.status, reply.code, len(reply.body)) == (400, "InvalidQueryParameterValue", 423)
    assert reply.body.startswith(BOM_DECLARATION_BREAK)
    fields = reply.error_fields()
    assert fields["Message"].startswith(
        "Error parsing query at or near character position 1: expected an operator\n"
    )
    assert (fields["QueryParameterName"], fields["QueryParameterValue"]) == ("where", "garbageTag")
    assert fields["Reason"] == "This query parameter value is invalid."


def test_restore_under_another_name(server: ServerProcess, container: ContainerClient) -> None:
    """Restore Container whose x-ms-deleted-container-name is not the container of the URL (an
    existing one): 400 InvalidHeaderValue in Azure's own words, naming no header, with a line
    break after the declaration, 273 bytes
    (ServiceApiTests.restoreContainerIntoExistingContainerError, x-ms-version 2023-08-03)."""
    http = BlobHttp(server.blob_port)
    reply = http.request(
        "PUT",
        f"/{container.container_name}?restype=container&comp=undelete",
        {
            "x-ms-deleted-container-name": "javarestoresomethingelse",
            "x-ms-deleted-container-version": "01D9FD31420322A0",
            "x-ms-version": "2023-08-03",
        },
    )
    assert (reply.status, reply.code, len(reply.body)) == (400, "InvalidHeaderValue", 273)
    assert reply.body.startswith(BOM_DECLARATION_BREAK + b"InvalidHeaderValue</Code>")
    assert reply.error_fields() | {"Message": reply.error_fields()["Message"].split("\n")[0]} == {
        "Code": "InvalidHeaderValue",
        "Message": "The value of deleted-container-name header must match the destination container name.",
    }


def test_set_blob_tags_answers_no_content_length(server: ServerProcess, container: ContainerClient) -> None:
    """Set Blob Tags: 204 with no Content-Length at all, as Azure answered the Java SDK
    (AccessPolicyAsyncTests.uploadFromUrlCopySourceTags[1], x-ms-version 2024-02-04, its body
    <Tags><TagSet><Tag><Key>foo</Key>...) and the Rust SDK (blob_client/test_blob_tags,
    2026-04-06), where the Put Blob and Delete Container beside it say 'Content-Length: 0'."""
    http = BlobHttp(server.blob_port)
    name = container.container_name
    put = http.request(
        "PUT", f"/{name}/tagged", {"x-ms-blob-type": "BlockBlob", "x-ms-version": "2024-02-04"}
    )
    assert (put.status, put.headers["content-length"]) == (201, "0")
    tagged = http.request(
        "PUT",
        f"/{name}/tagged?comp=tags",
        {"Content-Type": "application/xml", "x-ms-version": "2024-02-04"},
        b"<?xml version='1.0' encoding='UTF-8'?><Tags><TagSet><Tag><Key>foo</Key><Value>bar</Value></Tag>"
        b"</TagSet></Tags>",
    )
    assert (tagged.status, tagged.body) == (204, b"")
    assert "content-length" not in tagged.headers and "transfer-encoding" not in tagged.headers
    assert tagged.headers["x-ms-version"] == "2024-02-04"
    blob = container.get_blob_client("tagged")  # the SDK's pooled connection reads the bodiless 204s
    for round_ in range(3):
        blob.set_blob_tags({"round": str(round_)})
    assert blob.get_blob_tags() == {"round": "2"}
