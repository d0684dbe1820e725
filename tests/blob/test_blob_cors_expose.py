"""``Access-Control-Expose-Headers`` on the Blob service's answers to a CORS caller: a rule's
wildcard entries (``*``, ``x-ms-meta-*``) name the response's own headers, as Azure's answers to
browsers do (``x-ms-meta-a,x-ms-meta-b``, ``x-ms-content-crc64``), never the pattern, which a
browser would read as a literal header name and so hide metadata and checksums from the page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient, CorsRule

from tests.blobhttp import BlobHttp, cors_rules

METADATA_ONLY = CorsRule(["https://meta.example"], ["GET", "HEAD", "PUT"], exposed_headers=["x-ms-meta-*"])
EVERYTHING = CorsRule(["*"], ["GET", "HEAD", "PUT"], exposed_headers=["*"])


@pytest.fixture
def rules(blob_service: BlobServiceClient) -> Iterator[None]:
    with cors_rules(blob_service, [METADATA_ONLY, EVERYTHING]):
        yield


def _exposed(reply_headers: dict[str, str]) -> list[str]:
    return [name.strip() for name in reply_headers["access-control-expose-headers"].split(",")]


@pytest.mark.usefixtures("rules")
def test_prefix_entry_names_the_metadata_headers(http: BlobHttp, container: ContainerClient) -> None:
    path = f"/{container.container_name}/b"
    put = http.request(
        "PUT", path, {"x-ms-blob-type": "BlockBlob", "x-ms-meta-Color": "red", "x-ms-meta-size": "9"}, b"abc"
    )
    assert put.status == 201, put
    got = http.request("GET", path, {"Origin": "https://meta.example"})
    assert got.status == 200, got
    assert got.headers["access-control-allow-origin"] == "https://meta.example"
    exposed = _exposed(got.headers)
    assert "x-ms-meta-Color" in exposed and "x-ms-meta-size" in exposed  # as the response spells them
    assert "x-ms-meta-*" not in exposed
    assert {"x-ms-request-id", "ETag", "x-ms-blob-type"} <= set(exposed)  # the service's own, as before
    assert len(exposed) == len({name.lower() for name in exposed})  # each name once


@pytest.mark.usefixtures("rules")
def test_star_entry_names_every_header_of_the_response(http: BlobHttp, container: ContainerClient) -> None:
    path = f"/{container.container_name}/c"
    put = http.request(
        "PUT",
        path,
        {"x-ms-blob-type": "BlockBlob", "Origin": "https://app.example", "x-ms-meta-k": "v"},
        b"abc",
    )
    assert put.status == 201, put
    assert put.headers["access-control-allow-origin"] == "*"
    exposed = {name.lower() for name in _exposed(put.headers)}
    assert "*" not in exposed
    # Put Blob's own headers, which the service's fixed list does not name
    assert {"x-ms-content-crc64", "x-ms-request-server-encrypted", "content-md5"} <= exposed
    assert not any(name.startswith("access-control-") for name in exposed)
    got = http.request("HEAD", path, {"Origin": "https://app.example"})
    assert got.status == 200, got
    exposed = {name.lower() for name in _exposed(got.headers)}
    assert {"x-ms-meta-k", "x-ms-access-tier", "x-ms-server-encrypted"} <= exposed


@pytest.mark.usefixtures("rules")
def test_literal_entries_and_no_match(
    http: BlobHttp, blob_service: BlobServiceClient, container: ContainerClient
) -> None:
    literal = CorsRule(["https://lit.example"], ["GET"], exposed_headers=["x-custom-thing", "x-ms-meta-*"])
    blob_service.set_service_properties(cors=[literal])
    path = f"/{container.container_name}/d"
    assert http.request("PUT", path, {"x-ms-blob-type": "BlockBlob"}, b"abc").status == 201
    got = http.request("GET", path, {"Origin": "https://lit.example"})
    exposed = _exposed(got.headers)
    assert "x-custom-thing" in exposed  # a literal entry stays, present or not
    assert not any("*" in name or name.lower().startswith("x-ms-meta-") for name in exposed)
