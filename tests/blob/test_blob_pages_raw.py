"""Page blobs over raw HTTP: the bad inputs the SDK will not send get Azure's status and code in
its error format, and leave the blob as it was."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.storage.blob import ContainerClient

from tests.blobhttp import BlobHttp, Reply

MIB = 1024 * 1024


@pytest.fixture
def blob(http: BlobHttp, container: ContainerClient) -> Iterator[str]:
    """A 4 KiB page blob with its first page written."""
    path = f"/{container.container_name}/disk"
    assert create(http, path, 4096).status == 201
    assert put_page(http, path, "bytes=0-511", b"a" * 512).status == 201
    yield path


def create(http: BlobHttp, path: str, size: int | str, **headers: str) -> Reply:
    return http.request(
        "PUT", path, {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": str(size), **headers}
    )


def put_page(
    http: BlobHttp, path: str, span: str, body: bytes, action: str = "update", **headers: str
) -> Reply:
    return http.request(
        "PUT", path + "?comp=page", {"x-ms-range": span, "x-ms-page-write": action, **headers}, body
    )


def ranges(http: BlobHttp, path: str) -> bytes:
    reply = http.request("GET", path + "?comp=pagelist")
    assert reply.status == 200
    return reply.body


def assert_error(reply: Reply, status: int, code: str, **fields: str) -> None:
    assert (reply.status, reply.code) == (status, code), reply.body
    found = reply.error_fields()
    for name, value in fields.items():
        assert found[name] == value


@pytest.mark.parametrize(
    ("size", "headers", "field"),
    [
        (1000, {}, "x-ms-blob-content-length"),  # not a multiple of 512
        (8 * 1024**4 + 512, {}, "x-ms-blob-content-length"),  # past 8 TiB
        ("-512", {}, "x-ms-blob-content-length"),
        (512, {"x-ms-blob-sequence-number": "-1"}, "x-ms-blob-sequence-number"),
        (512, {"x-ms-blob-sequence-number": str(2**63)}, "x-ms-blob-sequence-number"),
    ],
)
def test_create_bad_headers(
    http: BlobHttp, container: ContainerClient, size: int | str, headers: dict[str, str], field: str
) -> None:
    path = f"/{container.container_name}/bad"
    assert_error(create(http, path, size, **headers), 400, "InvalidHeaderValue", HeaderName=field)
    assert http.request("HEAD", path).status == 404


def test_create_needs_size_and_no_body(http: BlobHttp, container: ContainerClient) -> None:
    path = f"/{container.container_name}/bad"
    reply = http.request("PUT", path, {"x-ms-blob-type": "PageBlob"})
    assert_error(reply, 400, "MissingRequiredHeader", HeaderName="x-ms-blob-content-length")
    reply = http.request("PUT", path, {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "512"}, b"x")
    assert_error(reply, 400, "InvalidHeaderValue", HeaderName="Content-Length")
    assert http.request("HEAD", path).status == 404


@pytest.mark.parametrize("tier", ["P20", "P4", "Hot"])
def test_create_takes_no_access_tier(http: BlobHttp, container: ContainerClient, tier: str) -> None:
    """A standard account's page blobs take no tier, a premium one neither: 400
    AccessTierNotSupportedForBlobType, as Azure answers the JS SDK's recorded "create with
    premium page blob tier" (x-ms-access-tier: P20)."""
    path = f"/{container.container_name}/tiered"
    assert_error(
        create(http, path, 512, **{"x-ms-access-tier": tier}), 400, "AccessTierNotSupportedForBlobType"
    )
    assert http.request("HEAD", path).status == 404


@pytest.mark.parametrize(
    ("headers", "body", "status", "code", "field"),
    [
        ({"x-ms-range": "bytes=0-3"}, b"abcd", 400, "InvalidHeaderValue", "x-ms-range"),
        ({"x-ms-range": "bytes=1-512"}, b"a" * 512, 400, "InvalidHeaderValue", "x-ms-range"),
        ({"x-ms-range": "bytes=512-"}, b"a" * 512, 400, "InvalidHeaderValue", "x-ms-range"),
        ({"x-ms-range": "bytes=0-1023"}, b"a" * 512, 400, "InvalidHeaderValue", "Content-Length"),
        ({"x-ms-range": "bytes=0-511", "x-ms-if-sequence-number-le": "x"}, b"a" * 512, 400,
         "InvalidHeaderValue", "x-ms-if-sequence-number-le"),
        ({"x-ms-range": "bytes=0-511", "x-ms-page-write": "overwrite"}, b"a" * 512, 400,
         "InvalidHeaderValue", "x-ms-page-write"),
        ({"x-ms-range": "bytes=0-511", "x-ms-page-write": "clear"}, b"a" * 512, 400,
         "InvalidHeaderValue", "Content-Length"),
    ],
)  # fmt: skip
def test_put_page_bad_headers(
    http: BlobHttp, blob: str, headers: dict[str, str], body: bytes, status: int, code: str, field: str
) -> None:
    before = ranges(http, blob)
    reply = http.request("PUT", blob + "?comp=page", {"x-ms-page-write": "update", **headers}, body)
    assert_error(reply, status, code, HeaderName=field)
    assert ranges(http, blob) == before


def test_put_page_missing_headers(http: BlobHttp, blob: str) -> None:
    reply = http.request("PUT", blob + "?comp=page", {"x-ms-range": "bytes=0-511"}, b"a" * 512)
    assert_error(reply, 400, "MissingRequiredHeader", HeaderName="x-ms-page-write")
    reply = http.request("PUT", blob + "?comp=page", {"x-ms-page-write": "update"}, b"a" * 512)
    assert_error(reply, 400, "MissingRequiredHeader", HeaderName="Range")


def test_put_page_range_and_size_limits(http: BlobHttp, blob: str) -> None:
    before = ranges(http, blob)
    assert_error(put_page(http, blob, "bytes=4096-4607", b"a" * 512), 416, "InvalidPageRange")
    assert_error(put_page(http, blob, "bytes=3584-4607", b"", "clear"), 416, "InvalidPageRange")
    too_big = 4 * MIB + 512
    assert_error(put_page(http, blob, f"bytes=0-{too_big - 1}", b"a" * too_big), 413, "RequestBodyTooLarge")
    assert ranges(http, blob) == before


def test_put_page_conditions(http: BlobHttp, blob: str) -> None:
    before = ranges(http, blob)
    for header, value in (("x-ms-if-sequence-number-lt", "0"), ("x-ms-if-sequence-number-eq", "1"),
                          ("x-ms-if-sequence-number-le", "0")):  # fmt: skip
        reply = put_page(http, blob, "bytes=512-1023", b"b" * 512, **{header: value})
        if header.endswith("le"):
            assert reply.status == 201  # 0 <= 0
            continue
        assert_error(reply, 412, "SequenceNumberConditionNotMet")
    assert_error(
        put_page(http, blob, "bytes=0-511", b"c" * 512, **{"If-Match": '"0x1"'}), 412, "ConditionNotMet"
    )
    assert_error(
        put_page(
            http, blob, "bytes=0-511", b"c" * 512, **{"x-ms-lease-id": "6f1d8a2e-0000-4000-8000-000000000000"}
        ),
        412,
        "LeaseNotPresentWithBlobOperation",
    )
    assert ranges(http, blob) != before  # only the write whose condition held
    content = http.request("GET", blob, {"x-ms-range": "bytes=0-1023"}).body
    assert content == b"a" * 512 + b"b" * 512


def test_page_operations_on_other_blobs(http: BlobHttp, container: ContainerClient, blob: str) -> None:
    block = f"/{container.container_name}/block"
    assert http.request("PUT", block, {"x-ms-blob-type": "BlockBlob"}, b"x" * 512).status == 201
    assert_error(put_page(http, block, "bytes=0-511", b"a" * 512), 409, "InvalidBlobType")
    assert_error(http.request("GET", block + "?comp=pagelist"), 409, "InvalidBlobType")
    reply = http.request("PUT", block + "?comp=properties", {"x-ms-blob-content-length": "1024"})
    assert_error(reply, 409, "InvalidBlobType")
    assert_error(http.request("PUT", blob + "?comp=appendblock", {}, b"x"), 409, "InvalidBlobType")
    assert_error(
        put_page(http, f"/{container.container_name}/missing", "bytes=0-511", b"a" * 512), 404, "BlobNotFound"
    )
    assert_error(http.request("GET", "/nocontainer/b?comp=pagelist"), 404, "ContainerNotFound")


def test_put_page_on_snapshot_and_from_url(http: BlobHttp, blob: str) -> None:
    snapshot = http.request("PUT", blob + "?comp=snapshot").headers["x-ms-snapshot"]
    reply = http.request("PUT", f"{blob}?comp=page&snapshot={snapshot}",
                         {"x-ms-range": "bytes=0-511", "x-ms-page-write": "update"}, b"a" * 512)  # fmt: skip
    assert_error(reply, 400, "InvalidOperation")
    from_url = {"x-ms-copy-source": f"{http.base}{blob}", "x-ms-source-range": "bytes=0-511"}
    reply = http.request("PUT", f"{blob}?comp=page&snapshot={snapshot}",
                         {"x-ms-range": "bytes=0-511", "x-ms-page-write": "update", **from_url})  # fmt: skip
    assert_error(reply, 400, "InvalidOperation")
    reply = put_page(http, blob, "bytes=0-511", b"", action="clear", **from_url)  # From URL only updates
    assert_error(reply, 400, "InvalidHeaderValue", HeaderName="x-ms-page-write")


def test_get_page_ranges_bad_queries(http: BlobHttp, blob: str) -> None:
    snapshot = http.request("PUT", blob + "?comp=snapshot").headers["x-ms-snapshot"]
    later = http.request("PUT", blob + "?comp=snapshot").headers["x-ms-snapshot"]
    reply = http.request("GET", f"{blob}?comp=pagelist&snapshot={snapshot}&prevsnapshot={later}")
    assert_error(reply, 400, "PreviousSnapshotCannotBeNewer")
    reply = http.request("GET", f"{blob}?comp=pagelist&prevsnapshot=2001-01-01T00:00:00.0000000Z")
    assert_error(reply, 409, "PreviousSnapshotNotFound")
    reply = http.request("GET", f"{blob}?comp=pagelist&prevsnapshot=yesterday")
    assert_error(reply, 400, "InvalidQueryParameterValue", QueryParameterName="prevsnapshot")
    reply = http.request("GET", f"{blob}?comp=pagelist", {"x-ms-previous-snapshot-url": f"{http.base}{blob}"})
    assert_error(reply, 400, "UnsupportedHeader", HeaderName="x-ms-previous-snapshot-url")
    reply = http.request("GET", f"{blob}?comp=pagelist&marker=nonsense")
    assert_error(reply, 400, "InvalidQueryParameterValue", QueryParameterName="marker")
    reply = http.request("GET", f"{blob}?comp=pagelist&maxresults=0")
    assert_error(reply, 400, "OutOfRangeQueryParameterValue")
    reply = http.request("GET", f"{blob}?comp=pagelist&prevsnapshot={snapshot}")
    assert reply.status == 200 and reply.body.endswith(
        b"?><PageList />"
    )  # empty, as recorded (JS SDK, 2019-12-12)
    listed = http.request("GET", f"{blob}?comp=pagelist", {"x-ms-range": "bytes=100-700"})
    assert listed.status == 200 and listed.headers["x-ms-blob-content-length"] == "4096"
    assert b"<PageRange><Start>0</Start><End>511</End></PageRange>" in listed.body


def test_get_page_ranges_past_the_end(http: BlobHttp, blob: str) -> None:
    """A window starting at the blob's size or beyond is 416 InvalidRange; one that starts inside
    and runs past the end is cut at the end."""
    for window in ("bytes=4096-4607", "bytes=8192-8703"):
        reply = http.request("GET", f"{blob}?comp=pagelist", {"x-ms-range": window})
        assert_error(reply, 416, "InvalidRange")
    listed = http.request("GET", f"{blob}?comp=pagelist", {"x-ms-range": "bytes=4095-8191"})
    assert listed.status == 200


def test_set_properties_bad_sequence_actions(http: BlobHttp, blob: str) -> None:
    def props(**headers: str) -> Reply:
        return http.request("PUT", blob + "?comp=properties", headers)

    assert_error(props(**{"x-ms-sequence-number-action": "increment", "x-ms-blob-sequence-number": "3"}), 400,
                 "InvalidHeaderValue", HeaderName="x-ms-blob-sequence-number")  # fmt: skip
    assert_error(props(**{"x-ms-sequence-number-action": "bump"}), 400, "InvalidHeaderValue",
                 HeaderName="x-ms-sequence-number-action")  # fmt: skip
    assert_error(props(**{"x-ms-sequence-number-action": "max"}), 400, "MissingRequiredHeader",
                 HeaderName="x-ms-blob-sequence-number")  # fmt: skip
    assert_error(props(**{"x-ms-blob-content-length": "1000"}), 400, "InvalidHeaderValue",
                 HeaderName="x-ms-blob-content-length")  # fmt: skip
    top = str(2**63 - 1)
    reply = props(**{"x-ms-sequence-number-action": "update", "x-ms-blob-sequence-number": top})
    assert reply.status == 200 and reply.headers["x-ms-blob-sequence-number"] == top
    assert_error(
        props(**{"x-ms-sequence-number-action": "increment"}), 409, "SequenceNumberIncrementTooLarge"
    )
    assert http.request("HEAD", blob).headers["x-ms-blob-sequence-number"] == top


def test_incremental_copy_bad_requests(http: BlobHttp, container: ContainerClient, blob: str) -> None:
    dest = f"/{container.container_name}/dest"
    assert_error(http.request("PUT", dest + "?comp=incrementalcopy"), 400, "MissingRequiredHeader",
                 HeaderName="x-ms-copy-source")  # fmt: skip
    source = f"{http.base}{blob}"
    reply = http.request("PUT", dest + "?comp=incrementalcopy", {"x-ms-copy-source": source})
    assert_error(reply, 409, "IncrementalCopySourceMustBeSnapshot")
    block = f"/{container.container_name}/block"
    assert http.request("PUT", block, {"x-ms-blob-type": "BlockBlob"}, b"x").status == 201
    snapshot = http.request("PUT", block + "?comp=snapshot").headers["x-ms-snapshot"]
    reply = http.request("PUT", dest + "?comp=incrementalcopy",
                         {"x-ms-copy-source": f"{http.base}{block}?snapshot={snapshot}"})  # fmt: skip
    assert_error(reply, 409, "InvalidSourceBlobType")
    page_snapshot = http.request("PUT", blob + "?comp=snapshot").headers["x-ms-snapshot"]
    reply = http.request("PUT", block + "?comp=incrementalcopy",
                         {"x-ms-copy-source": f"{source}?snapshot={page_snapshot}"})  # fmt: skip
    assert_error(reply, 409, "InvalidBlobType")  # the destination is not an incremental copy
    assert http.request("HEAD", dest).status == 404


@pytest.mark.parametrize(
    "source", ["https://www.error.com?snapshot=snapshot", "https://acct.blob.core.windows.net/c?snapshot=x"]
)
def test_incremental_copy_source_not_a_blob_url(
    http: BlobHttp, container: ContainerClient, source: str
) -> None:
    """A source that is no storage blob URL is 409 InvalidSourceBlobUrl, as Azure answered the
    Java SDK's PageBlobApiTests.startIncrementalCopyError (``https://www.error.com``)."""
    dest = f"/{container.container_name}/dest"
    reply = http.request("PUT", dest + "?comp=incrementalcopy", {"x-ms-copy-source": source})
    assert_error(reply, 409, "InvalidSourceBlobUrl")
    message = reply.error_fields()["Message"]
    assert message.startswith(
        "The source url for incremental copy request must be valid azure storage blob url.\n"
    )
