"""Shared Key for the Blob and Queue services, checked against the official SDKs' own signer.

The SDK signs a request with its ``SharedKeyCredentialPolicy``; the server must accept exactly
that header, and refuse it when anything signed changes. Header ordering follows the service's
collation, which the SDK reproduces (names with hyphens in odd places are the hard case).
"""

from __future__ import annotations

import base64
import random
from functools import cmp_to_key
from urllib.parse import parse_qsl, urlsplit

import pytest
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy as BlobPolicy
from azure.storage.queue._shared.authentication import SharedKeyCredentialPolicy as QueuePolicy
from azure.storage.queue._shared.authentication import compare

from tabulae.auth.shared_key import _header_order, verify_blob_queue_authorization
from tabulae.model.errors import ServiceError

ACCOUNT = "devstoreaccount1"
KEY_B64 = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
KEY = base64.b64decode(KEY_B64)
DATE = "Tue, 24 Nov 2026 21:00:00 GMT"


def signed(
    policy_class: type, method: str, url: str, headers: dict[str, str], body: bytes = b""
) -> dict[str, str]:
    """The request's headers after the SDK's policy signed it, lower-cased as a server sees them."""
    request = HttpRequest(method, url, headers={"x-ms-date": DATE, "x-ms-version": "2026-02-06", **headers})
    if body:
        request.set_bytes_body(body)
    policy_class(ACCOUNT, KEY_B64).on_request(PipelineRequest(request, PipelineContext(None)))
    return {name.lower(): value for name, value in request.headers.items()}


def verify(method: str, url: str, headers: dict[str, str], account: str = ACCOUNT) -> None:
    parts = urlsplit(url)
    verify_blob_queue_authorization(
        headers["authorization"],
        method=method,
        raw_path=parts.path,
        headers=headers,
        query_pairs=parse_qsl(parts.query, keep_blank_values=True),
        account=account,
        keys=[KEY],
    )


CASES = [
    (QueuePolicy, "PUT", "http://127.0.0.1:10001/devstoreaccount1/jobs", {"x-ms-meta-Owner": "a b"}, b""),
    (
        QueuePolicy,
        "POST",
        "http://127.0.0.1:10001/devstoreaccount1/jobs/messages?visibilitytimeout=5&messagettl=-1",
        {"Content-Type": "application/xml"},
        b"<QueueMessage><MessageText>hi</MessageText></QueueMessage>",
    ),
    (
        QueuePolicy,
        "GET",
        "http://127.0.0.1:10001/devstoreaccount1?comp=list&include=metadata&prefix=j",
        {},
        b"",
    ),
    (
        BlobPolicy,
        "PUT",
        "http://127.0.0.1:10000/devstoreaccount1/c/dir/a%20b%C3%A9.txt",
        {
            "x-ms-blob-type": "BlockBlob",
            "x-ms-meta-a-c": "1",
            "x-ms-meta-ab": "2",
            "Content-Type": "text/plain",
            "If-None-Match": "*",
        },
        b"hello",
    ),
    (
        BlobPolicy,
        "GET",
        "https://devstoreaccount1.blob.core.windows.net/c/b?snapshot=2026-11-24T21%3A00%3A00.0000000Z",
        {"x-ms-range": "bytes=0-9"},
        b"",
    ),
]


@pytest.mark.parametrize(("policy", "method", "url", "headers", "body"), CASES)
def test_the_sdk_signature_is_accepted(
    policy: type, method: str, url: str, headers: dict[str, str], body: bytes
) -> None:
    verify(method, url, signed(policy, method, url, headers, body))


@pytest.mark.parametrize(("policy", "method", "url", "headers", "body"), CASES)
def test_changing_a_signed_part_is_refused(
    policy: type, method: str, url: str, headers: dict[str, str], body: bytes
) -> None:
    sent = signed(policy, method, url, headers, body)
    for tampered in (
        {**sent, "x-ms-date": "Tue, 24 Nov 2026 21:00:01 GMT"},
        {**sent, "x-ms-meta-extra": "1"},
        {**sent, "content-type": "application/evil"},
    ):
        with pytest.raises(ServiceError) as info:
            verify(method, url, tampered)
        assert info.value.code == "AuthenticationFailed"
    with pytest.raises(ServiceError):
        verify("DELETE", url, sent)
    with pytest.raises(ServiceError):
        verify(method, url + ("&" if "?" in url else "?") + "timeout=30", sent)


def test_the_other_account_is_refused() -> None:
    method, url = "GET", "http://127.0.0.1:10001/devstoreaccount1?comp=list"
    with pytest.raises(ServiceError):
        verify(method, url, signed(QueuePolicy, method, url, {}), account="otheraccount")


def test_header_order_is_the_services_collation() -> None:
    """Our sort key orders names exactly as the SDK's port of the service's comparison."""
    names = [f"x-ms-{a}{b}{c}" for a in "ab-_'9" for b in "b-a.~" for c in ("", "-", "z")]
    random.Random(7).shuffle(names)
    assert sorted(names, key=_header_order) == sorted(names, key=cmp_to_key(compare))
