"""The Blob batch codec against the real SDK: request bodies built by azure-storage-blob's own
``delete_blobs`` / ``set_standard_blob_tier_blobs`` (captured by a transport that never touches
the network) are parsed, and the responses we render are fed back to the same SDK's response
parser in-process. Plus the whole-batch errors Azure answers and the 256 sub-request limit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from azure.core.pipeline.transport import HttpRequest, HttpTransport
from azure.core.pipeline.transport._requests_basic import RequestsTransportResponse
from azure.storage.blob import (
    BlobServiceClient,
    ContainerClient,
    ContainerSasPermissions,
    PartialBatchErrorException,
    StandardBlobTier,
    generate_container_sas,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tabulae.blob.api import batch_codec
from tabulae.blob.api.batch_codec import BatchPart
from tabulae.model.errors import ServiceError

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
URL = f"http://127.0.0.1:10000/{ACCOUNT}"
VERSION = "2026-10-06"


class Loopback(HttpTransport):
    """Records each request the SDK sends and answers with ``respond(request)``: no network."""

    def __init__(self, respond: Callable[[Any], tuple[int, str, bytes]]) -> None:
        self.sent: list[Any] = []
        self.respond = respond

    def __enter__(self) -> Loopback:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def send(self, request: HttpRequest, **kwargs: Any) -> RequestsTransportResponse:  # type: ignore[override]
        self.sent.append(request)
        status, content_type, body = self.respond(request)
        raw = requests.Response()
        raw.status_code = status
        raw.headers["Content-Type"] = content_type
        raw._content = body
        return RequestsTransportResponse(request, raw)


def empty_answer(_: Any) -> tuple[int, str, bytes]:
    return 202, "multipart/mixed; boundary=batchresponse_0", b"--batchresponse_0--\r\n"


def container(transport: Loopback, credential: Any = None) -> ContainerClient:
    service = BlobServiceClient(
        URL, credential=credential or {"account_name": ACCOUNT, "account_key": KEY}, transport=transport
    )
    return service.get_container_client("c1")


def sent_batch(transport: Loopback) -> tuple[str, bytes, str]:
    request = transport.sent[-1]
    return request.headers["Content-Type"], bytes(request.body), request.url


def error_of(action: Callable[[], object]) -> ServiceError:
    with pytest.raises(ServiceError) as caught:
        action()
    return caught.value


# ---------------------------------------------------------------------- parsing SDK bodies


def test_delete_blobs_body_from_the_sdk() -> None:
    transport = Loopback(empty_answer)
    container(transport).delete_blobs(
        "a", "b/c d", "e", raise_on_any_failure=False, delete_snapshots="include"
    )
    content_type, body, url = sent_batch(transport)
    assert url.endswith("/c1?restype=container&comp=batch")
    batch = batch_codec.parse_blob_batch(content_type, body)
    assert batch.kind == batch_codec.DELETE
    assert [sub.method for sub in batch.subrequests] == ["DELETE"] * 3
    paths = [batch_codec.target_parts(sub.target)[0] for sub in batch.subrequests]
    assert paths == [f"/{ACCOUNT}/c1/a", f"/{ACCOUNT}/c1/b/c%20d", f"/{ACCOUNT}/c1/e"]
    assert [sub.content_id for sub in batch.subrequests] == ["0", "1", "2"]
    for sub in batch.subrequests:
        headers = dict(sub.headers)
        assert headers["authorization"].startswith(f"SharedKey {ACCOUNT}:")
        assert headers["x-ms-delete-snapshots"] == "include"
        assert "x-ms-date" in headers
        assert sub.body == b""


def test_set_tier_body_from_the_sdk_at_account_level() -> None:
    transport = Loopback(empty_answer)
    service = BlobServiceClient(
        URL, credential={"account_name": ACCOUNT, "account_key": KEY}, transport=transport
    )
    service.get_container_client("c1").set_standard_blob_tier_blobs(
        StandardBlobTier.COOL, "x", "y", raise_on_any_failure=False, rehydrate_priority="High"
    )
    content_type, body, _ = sent_batch(transport)
    batch = batch_codec.parse_blob_batch(content_type, body)
    assert batch.kind == batch_codec.SET_TIER
    for sub in batch.subrequests:
        path, query = batch_codec.target_parts(sub.target)
        assert path.endswith(("/c1/x", "/c1/y"))
        assert sub.method == "PUT" and query["comp"] == "tier"
        assert dict(sub.headers)["x-ms-access-tier"] == "Cool"
        assert dict(sub.headers)["x-ms-rehydrate-priority"] == "High"


def test_sas_sub_requests_carry_their_signature_in_the_target() -> None:
    sas = generate_container_sas(
        ACCOUNT,
        "c1",
        account_key=KEY,
        permission=ContainerSasPermissions(delete=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    transport = Loopback(empty_answer)
    client = ContainerClient(f"{URL}/c1?{sas}", "c1", transport=transport)
    client.delete_blobs("a", "b", raise_on_any_failure=False)
    content_type, body, _ = sent_batch(transport)
    batch = batch_codec.parse_blob_batch(content_type, body)
    for sub in batch.subrequests:
        _, query = batch_codec.target_parts(sub.target)
        assert query["sp"] == "d" and "sig" in query
        assert "authorization" not in dict(sub.headers)


def test_a_batch_of_256_parses_and_257_is_refused() -> None:
    transport = Loopback(empty_answer)
    names = [f"blob{i}" for i in range(257)]
    container(transport).delete_blobs(*names[:256], raise_on_any_failure=False)
    assert len(batch_codec.parse_blob_batch(*sent_batch(transport)[:2]).subrequests) == 256
    container(transport).delete_blobs(*names, raise_on_any_failure=False)
    error = error_of(lambda: batch_codec.parse_blob_batch(*sent_batch(transport)[:2]))
    assert (error.status, error.code) == (400, "ExceedsMaxBatchRequestCount")


# ------------------------------------------------------------------- whole-batch errors

PART = (
    b"--b\r\nContent-Type: application/http\r\nContent-ID: 0\r\n\r\n"
    b"DELETE /c/a HTTP/1.1\r\nx-ms-date: Thu, 14 Jun 2018 16:46:54 GMT\r\nContent-Length: 0\r\n\r\n"
)


@pytest.mark.parametrize(
    ("content_type", "body", "status", "code"),
    [
        (None, PART + b"--b--", 400, "MissingRequiredHeader"),
        ("application/json", PART + b"--b--", 400, "InvalidHeaderValue"),
        ("multipart/mixed", PART + b"--b--", 400, "InvalidHeaderValue"),
        ("multipart/mixed; boundary=b", b"", 400, "InvalidInput"),
        ("multipart/mixed; boundary=b", b"--b--\r\n", 400, "InvalidInput"),
        ("multipart/mixed; boundary=b", b"no delimiter here", 400, "InvalidInput"),
        (
            "multipart/mixed; boundary=b",
            b"--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n--b--",
            400,
            "InvalidInput",
        ),
        (
            "multipart/mixed; boundary=b",
            PART.replace(b"DELETE /c/a", b"GET /c/a") + b"--b--",
            400,
            "InvalidInput",
        ),
        (
            "multipart/mixed; boundary=b",
            PART.replace(b"DELETE /c/a", b"BAD LINE") + b"--b--",
            400,
            "InvalidInput",
        ),
        (
            "multipart/mixed; boundary=b",
            PART + PART.replace(b"DELETE /c/a", b"PUT /c/a?comp=tier") + b"--b--",
            400,
            "AllBatchSubRequestsShouldBeSameApi",
        ),
    ],
)
def test_whole_batch_errors(content_type: str | None, body: bytes, status: int, code: str) -> None:
    error = error_of(lambda: batch_codec.parse_blob_batch(content_type, body))
    assert (error.status, error.code) == (status, code)


def test_bodies_over_4_mib_are_refused() -> None:
    batch_codec.check_body_length(batch_codec.MAX_BODY)
    error = error_of(lambda: batch_codec.check_body_length(batch_codec.MAX_BODY + 1))
    assert (error.status, error.code) == (413, "RequestBodyTooLarge")


def test_the_reference_sample_parses() -> None:
    body = b"\r\n".join(
        [
            b"--batch_357de4f7",
            b"Content-Type: application/http",
            b"Content-Transfer-Encoding: binary",
            b"Content-ID: 0",
            b"",
            b"DELETE /container0/blob0 HTTP/1.1",
            b"x-ms-date: Thu, 14 Jun 2018 16:46:54 GMT",
            b"Authorization: SharedKey account:G4jjBXA7LI/RnWKIOQ8i9xH4p76pAQ+4Fs4R1VxasaE=",
            b"Content-Length: 0",
            b"--batch_357de4f7",
            b"Content-Type: application/http",
            b"Content-Transfer-Encoding: binary",
            b"Content-ID: 1",
            b"",
            b"DELETE /container1/blob1 HTTP/1.1",
            b"Content-Length: 0",
            b"--batch_357de4f7--",
            b"",
        ]
    )
    batch = batch_codec.parse_blob_batch("multipart/mixed; boundary=batch_357de4f7", body)
    assert [sub.target for sub in batch.subrequests] == ["/container0/blob0", "/container1/blob1"]


# -------------------------------------------------------- responses read by the SDK parser


def answer_with(parts: list[BatchPart]) -> Callable[[Any], tuple[int, str, bytes]]:
    def respond(_: Any) -> tuple[int, str, bytes]:
        content_type, body = batch_codec.render_blob_batch_response(parts)
        return 202, content_type, body

    return respond


def deleted(content_id: str) -> BatchPart:
    headers = (
        ("x-ms-delete-type-permanent", "true"),
        ("x-ms-request-id", f"r{content_id}"),
        ("x-ms-version", VERSION),
    )
    return BatchPart(202, headers, content_id=content_id)


def test_the_sdk_reads_our_response_parts() -> None:
    missing = batch_codec.error_part(
        ServiceError("BlobNotFound"), "r2", "2026-11-27T05:00:00.0000000Z", VERSION, "2"
    )
    transport = Loopback(answer_with([deleted("0"), deleted("1"), missing]))
    parts = list(container(transport).delete_blobs("a", "b", "c", raise_on_any_failure=False))
    assert [part.status_code for part in parts] == [202, 202, 404]
    assert parts[0].headers["x-ms-request-id"] == "r0"
    assert parts[2].headers["x-ms-error-code"] == "BlobNotFound"
    assert b"<Code>BlobNotFound</Code>" in parts[2].body()
    assert parts[2].reason == "The specified blob does not exist."


def test_a_failed_part_raises_the_sdks_partial_failure() -> None:
    missing = batch_codec.error_part(ServiceError("BlobNotFound"), "r1", "t", VERSION, "1")
    transport = Loopback(answer_with([deleted("0"), missing]))
    with pytest.raises(PartialBatchErrorException) as caught:
        container(transport).delete_blobs("a", "b")
    assert [part.status_code for part in caught.value.parts] == [202, 404]


def test_a_whole_batch_error_is_one_400_part_without_content_id() -> None:
    content_type, body = batch_codec.render_batch_error(
        ServiceError("ExceedsMaxBatchRequestCount"), "r", "t", VERSION
    )
    assert b"Content-ID" not in body
    assert b"HTTP/1.1 400 The batch operation exceeds maximum number of allowed subrequests.\r\n" in body
    transport = Loopback(lambda _: (202, content_type, body))
    with pytest.raises(PartialBatchErrorException) as caught:
        container(transport).delete_blobs("a", "b")
    first = caught.value.parts[0]
    assert first.status_code == 400
    assert first.headers["x-ms-error-code"] == "ExceedsMaxBatchRequestCount"


def test_the_response_matches_the_reference_layout() -> None:
    content_type, body = batch_codec.render_blob_batch_response([deleted("0")], boundary="batchresponse_x")
    assert content_type == "multipart/mixed; boundary=batchresponse_x"
    assert body == (
        b"--batchresponse_x\r\nContent-Type: application/http\r\nContent-ID: 0\r\n\r\n"
        b"HTTP/1.1 202 Accepted\r\nx-ms-delete-type-permanent: true\r\nx-ms-request-id: r0\r\n"
        b"x-ms-version: 2026-10-06\r\n\r\n--batchresponse_x--\r\n"
    )


header_values = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([200, 202, 400, 403, 404, 409, 412]), header_values, st.binary(max_size=40)
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_rendered_response_reads_back_through_the_sdk(parts: list[tuple[int, str, bytes]]) -> None:
    bodies = [body.replace(b"--", b"-") for _, _, body in parts]  # Content-Length is the body's as sent
    rendered = [
        BatchPart(
            status, (("x-ms-request-id", value), ("Content-Length", str(len(body)))), body, content_id=str(i)
        )
        for i, ((status, value, _), body) in enumerate(zip(parts, bodies, strict=True))
    ]
    transport = Loopback(answer_with(rendered))
    names = [f"b{i}" for i in range(len(parts))]
    read = list(container(transport).delete_blobs(*names, raise_on_any_failure=False))
    assert [r.status_code for r in read] == [p.status for p in rendered]
    assert [r.headers["x-ms-request-id"] for r in read] == [value for _, value, _ in parts]
    assert [r.body() for r in read] == [p.body for p in rendered]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        ["multipart/mixed; boundary=b", 'multipart/mixed; boundary="b"', "multipart/mixed", None]
    ),
    st.lists(
        st.sampled_from(
            [
                b"--b\r\n",
                b"--b--\r\n",
                b"Content-Type: application/http\r\n",
                b"Content-ID: 1\r\n",
                b"Content-Transfer-Encoding: base64\r\n",
                b"\r\n",
                b"\n",
                b"DELETE /c/a HTTP/1.1\r\n",
                b"PUT /c/a?comp=tier HTTP/1.1\r\n",
                b"GET / HTTP/1.1\r\n",
                b"x-ms-access-tier: Hot\r\n",
                b"\xff\x00",
                b" continued\r\n",
            ]
        ),
        max_size=16,
    ).map(b"".join),
)
def test_any_body_parses_or_is_refused_with_a_400(content_type: str | None, body: bytes) -> None:
    try:
        batch = batch_codec.parse_blob_batch(content_type, body)
    except ServiceError as error:
        assert error.status == 400
    else:
        assert 1 <= len(batch.subrequests) <= batch_codec.MAX_SUBREQUESTS
        assert batch.kind in (batch_codec.DELETE, batch_codec.SET_TIER)
