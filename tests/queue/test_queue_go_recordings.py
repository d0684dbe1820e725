"""Requests the Go SDK (``azqueue``) sends, answered as its recordings of real Azure show
(``Azure/azure-sdk-assets``, ``go/sdk/storage/azqueue/testdata/recordings/Test/``, x-ms-version
2018-03-28). Raw HTTP with the Go client's bodies, so the bytes are the ones compared.

* ``TestQueueSetACLMoreThanFive.json``: Set Queue ACL with six well-formed identifiers is 400
  ``InvalidXmlDocument`` naming line 0, position 0 and an empty ``<Reason />`` (294 bytes with
  Azure's request id and time, as ours).
* ``TestSetPropertiesSetCors.json``: a CORS rule's headers read back with the exact names before
  the prefixes (``x-ms-meta-data*,x-ms-meta-target*,x-ms-meta-xyz,x-ms-meta-foo`` as
  ``x-ms-meta-xyz,x-ms-meta-foo,x-ms-meta-data*,x-ms-meta-target*``), ``GET, PUT`` as
  ``GET,PUT``, and empty lists as ``<AllowedHeaders />`` and ``<ExposedHeaders />``.

A metrics retention of 366 days is a document error here as the Table service's recording shows
(tests/table/api/test_go_recordings.py), with the place and reason the Blob service names for
its delete retention (tests/blob/test_blob_go_recordings.py): assumed for the Queue service.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.blobhttp import BlobHttp
from tests.queuehttp import QueueHttp, assert_error
from tests.serverproc import ServerProcess

GO_HEADERS = {"x-ms-version": "2018-03-28", "Accept": "application/xml"}
GO_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n'
PROPERTIES = "/?restype=service&comp=properties"
GO_CORS = (
    "<Cors><CorsRule><AllowedHeaders></AllowedHeaders><AllowedMethods>GET</AllowedMethods>"
    "<AllowedOrigins>www.xyz.com</AllowedOrigins><ExposedHeaders></ExposedHeaders>"
    "<MaxAgeInSeconds>0</MaxAgeInSeconds></CorsRule><CorsRule><AllowedHeaders>x-ms-meta-data*,"
    "x-ms-meta-target*,x-ms-meta-xyz,x-ms-meta-foo</AllowedHeaders><AllowedMethods>GET, PUT"
    "</AllowedMethods><AllowedOrigins>www.xyz.com,www.ab.com,www.bc.com</AllowedOrigins>"
    "<ExposedHeaders>x-ms-meta-data*,x-ms-meta-source*,x-ms-meta-abc,x-ms-meta-bcd</ExposedHeaders>"
    "<MaxAgeInSeconds>500</MaxAgeInSeconds></CorsRule></Cors>"
)
AZURE_CORS = (
    "<Cors><CorsRule><AllowedMethods>GET</AllowedMethods><AllowedOrigins>www.xyz.com</AllowedOrigins>"
    "<AllowedHeaders /><ExposedHeaders /><MaxAgeInSeconds>0</MaxAgeInSeconds></CorsRule><CorsRule>"
    "<AllowedMethods>GET,PUT</AllowedMethods><AllowedOrigins>www.xyz.com,www.ab.com,www.bc.com"
    "</AllowedOrigins><AllowedHeaders>x-ms-meta-xyz,x-ms-meta-foo,x-ms-meta-data*,x-ms-meta-target*"
    "</AllowedHeaders><ExposedHeaders>x-ms-meta-abc,x-ms-meta-bcd,x-ms-meta-data*,x-ms-meta-source*"
    "</ExposedHeaders><MaxAgeInSeconds>500</MaxAgeInSeconds></CorsRule></Cors>"
)


def _go_identifier(id_: str, start: str, expiry: str) -> str:
    """A signed identifier as the Go client writes it: the policy before the Id."""
    return (
        f"<SignedIdentifier><AccessPolicy><Permission>r</Permission><Expiry>{expiry}</Expiry>"
        f"<Start>{start}</Start></AccessPolicy><Id>{id_}</Id></SignedIdentifier>"
    )


@pytest.fixture
def q(queue_http: QueueHttp, queue_name: str) -> Iterator[str]:
    assert queue_http.request("PUT", f"/{queue_name}", headers=GO_HEADERS).status == 201
    yield queue_name
    queue_http.delete(queue_name)


def test_six_identifiers_name_no_place(queue_http: QueueHttp, q: str) -> None:
    six = "".join(_go_identifier(f"000{i}", "2021-06-11T20:00:00Z", "2049-06-11T20:00:00Z") for i in range(6))
    body = f"{GO_DECLARATION}<SignedIdentifiers>{six}</SignedIdentifiers>"
    response = queue_http.request("PUT", f"/{q}?comp=acl", body, headers=GO_HEADERS)
    assert_error(response, 400, "InvalidXmlDocument", LineNumber="0", LinePosition="0", Reason="")
    assert response.body.endswith(
        b"</Message><LineNumber>0</LineNumber><LinePosition>0</LinePosition><Reason /></Error>"
    ), response
    assert response.header("content-length") == "294"
    assert queue_http.request("GET", f"/{q}?comp=acl", headers=GO_HEADERS).body.endswith(
        b"<SignedIdentifiers />"
    )
    # five are taken
    five = "".join(
        _go_identifier(f"000{i}", "2021-06-11T20:00:00Z", "2049-06-11T20:00:00Z") for i in range(5)
    )
    body = f"{GO_DECLARATION}<SignedIdentifiers>{five}</SignedIdentifiers>"
    assert queue_http.request("PUT", f"/{q}?comp=acl", body, headers=GO_HEADERS).status == 204


def test_cors_headers_read_back_exact_names_first(queue_http: QueueHttp, server: ServerProcess) -> None:
    before = queue_http.request("GET", PROPERTIES, headers=GO_HEADERS).body
    try:
        body = f"{GO_DECLARATION}<StorageServiceProperties>{GO_CORS}</StorageServiceProperties>"
        assert queue_http.request("PUT", PROPERTIES, body, headers=GO_HEADERS).status == 202
        got = queue_http.request("GET", PROPERTIES, headers=GO_HEADERS).body.decode()
        assert AZURE_CORS + "</StorageServiceProperties>" in got, got
    finally:
        assert queue_http.request("PUT", PROPERTIES, before, headers=GO_HEADERS).status == 202
    # the Blob service keeps them alike (the Data Lake recording's Get Blob Service Properties)
    blob = BlobHttp(server.blob_port)
    headers = {"x-ms-version": "2023-11-03", "Content-Type": "application/xml"}
    before = blob.request("GET", PROPERTIES, headers).body
    try:
        body = f"{GO_DECLARATION}<StorageServiceProperties>{GO_CORS}</StorageServiceProperties>"
        assert blob.request("PUT", PROPERTIES, headers, body.encode()).status == 202
        assert AZURE_CORS.encode() in blob.request("GET", PROPERTIES, headers).body
    finally:
        assert blob.request("PUT", PROPERTIES, headers, before).status == 202


def test_metrics_retention_too_long_is_a_document_error(queue_http: QueueHttp) -> None:
    body = (
        f"{GO_DECLARATION}<StorageServiceProperties><MinuteMetrics><Enabled>true</Enabled><IncludeAPIs>"
        "true</IncludeAPIs><RetentionPolicy><Enabled>true</Enabled><Days>366</Days></RetentionPolicy>"
        "<Version>1.0</Version></MinuteMetrics></StorageServiceProperties>"
    )
    answer = queue_http.request("PUT", PROPERTIES, body, headers=GO_HEADERS)
    reason = "Retention days must be greater than 0 and less than or equal to 365 days."
    assert_error(answer, 400, "InvalidXmlDocument", LineNumber="2", LinePosition="154", Reason=reason)
    missing = body.replace("<Days>366</Days>", "")
    answer = queue_http.request("PUT", PROPERTIES, missing, headers=GO_HEADERS)
    assert_error(answer, 400, "InvalidXmlDocument", LinePosition="138", Reason="Element is missing: Days.")
