"""A CORS rule may allow every subdomain of a domain: ``AllowedOrigins`` ``http://*.contoso.com``,
the form "CORS support for Azure Storage" shows in its sample rule and Microsoft's storage team
describes ("Wildcard origin could only be at top level with http(s):// prefix, or simply *",
MicrosoftDocs/azure-docs#117277). Such a rule answers a subdomain's preflight and actual requests
as a rule naming that origin would (the origin itself, with credentials, and ``Vary``); the
domain itself, another scheme or another domain stay unmatched (403 to a preflight). Found by
Azurite's CORS tests. Raw HTTP (a browser's requests) and the SDK setting the rule, both stores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient, CorsRule

from tests.blobhttp import BlobHttp, cors_rules

SUBDOMAINS = CorsRule(
    ["http://*.contoso.com"], ["GET", "PUT"], allowed_headers=["x-ms-*"], max_age_in_seconds=60
)


@pytest.fixture
def rules(blob_service: BlobServiceClient) -> Iterator[None]:
    with cors_rules(blob_service, [SUBDOMAINS]):
        yield


def _preflight(http: BlobHttp, origin: str) -> int:
    reply = http.request(
        "OPTIONS",
        "/anything/blob",
        {
            "Origin": origin,
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "x-ms-blob-type",
        },
        signed=False,
    )
    if reply.status == 200:
        assert reply.headers["access-control-allow-origin"] == origin
        assert reply.headers["access-control-allow-methods"] == "PUT"
    return reply.status


@pytest.mark.usefixtures("rules")
@pytest.mark.parametrize(
    "origin", ["http://app.contoso.com", "http://a.b.contoso.com", "http://APP.Contoso.com"]
)
def test_subdomains_pass_the_preflight(http: BlobHttp, origin: str) -> None:
    assert _preflight(http, origin) == 200


@pytest.mark.usefixtures("rules")
@pytest.mark.parametrize(
    "origin",
    [
        "http://contoso.com",
        "https://app.contoso.com",
        "http://app.notcontoso.com",
        "http://contoso.com.evil.example",
    ],
)
def test_other_origins_fail_the_preflight(http: BlobHttp, origin: str) -> None:
    assert _preflight(http, origin) == 403


@pytest.mark.usefixtures("rules")
def test_actual_request_from_a_subdomain(http: BlobHttp, container: ContainerClient) -> None:
    container.upload_blob("b", b"abc")
    got = http.request("GET", f"/{container.container_name}/b", {"Origin": "http://app.contoso.com"})
    assert got.status == 200, got
    assert got.headers["access-control-allow-origin"] == "http://app.contoso.com"
    assert got.headers["access-control-allow-credentials"] == "true"
    assert got.headers["vary"] == "Origin"
    elsewhere = http.request("GET", f"/{container.container_name}/b", {"Origin": "http://contoso.com"})
    assert "access-control-allow-origin" not in elsewhere.headers
