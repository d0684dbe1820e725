"""Handlers of the page blob operations: Put Blob of a page blob, Put Page (update and clear),
Get Page Ranges, a page blob's Set Blob Properties, and Incremental Copy Blob.

Headers are read and checked here, in Azure's terms (a misaligned range is 400
InvalidHeaderValue naming the header it came in); the rules of the blob's state are the
service's (:mod:`tabulae.blob.pageblobs`).
"""

from __future__ import annotations

from tabulae.blob.api import blobs, copy_source, immutability
from tabulae.blob.api.blobs import _no_snapshot, _root_only
from tabulae.blob.api.call import Call
from tabulae.blob.api.containers import max_results, xml
from tabulae.blob.api.formats import DECLARATION
from tabulae.blob.api.headers import bad_header, byte_range, conditions, content_properties, etag_headers
from tabulae.blob.api.operations import unsupported_header
from tabulae.blob.api.tags import header_tags
from tabulae.blob.pageblobs import PageBlobs, PageRange, PageWrite
from tabulae.blob.rules import premium
from tabulae.blob.rules.pages import (
    MAX_PAGE_WRITE,
    SequenceConditions,
    check_aligned,
    parse_sequence_condition,
    parse_sequence_number,
)
from tabulae.blob.service import parse_snapshot
from tabulae.http.messages import Headers, Response
from tabulae.http.metadata import request_metadata
from tabulae.model.errors import ServiceError

_ENCRYPTED = (b"x-ms-request-server-encrypted", b"true")
# Set Blob Properties headers that only a page blob takes.
PAGE_PROPERTY_HEADERS = (
    "x-ms-blob-content-length",
    "x-ms-sequence-number-action",
    "x-ms-blob-sequence-number",
)
# Set Blob Properties headers that replace the content properties.
_CONTENT_HEADERS = (
    "x-ms-blob-content-type", "x-ms-blob-content-encoding", "x-ms-blob-content-language",
    "x-ms-blob-content-disposition", "x-ms-blob-cache-control", "x-ms-blob-content-md5",
)  # fmt: skip


def _missing(name: str) -> ServiceError:
    return ServiceError("MissingRequiredHeader", fields=(("HeaderName", name),))


def _number(headers: dict[str, str], name: str) -> int | None:
    value = headers.get(name)
    return None if value is None else parse_sequence_number(value, name)


def _condition(headers: dict[str, str], name: str) -> int | None:
    value = headers.get(name)
    return None if value is None else parse_sequence_condition(value, name)


def _sequence_header(number: int) -> tuple[bytes, bytes]:
    return (b"x-ms-blob-sequence-number", str(number).encode())


async def put_blob(call: Call) -> Response:
    """Put Blob: a page blob's here, the others' in :func:`blobs.put_blob`."""
    if call.request.headers.get("x-ms-blob-type") == "PageBlob":
        _root_only(call)
        return await put_page_blob(call)
    return await blobs.put_blob(call)


async def set_blob_properties(call: Call) -> Response:
    """Set Blob Properties: with a page blob's own headers here, else in :func:`blobs.set_blob_properties`."""
    headers = call.request.headers
    if any(name in headers for name in PAGE_PROPERTY_HEADERS):
        _root_only(call)
        return await set_page_blob_properties(call)
    return await blobs.set_blob_properties(call)


async def put_page_blob(call: Call) -> Response:
    """Put Blob with ``x-ms-blob-type: PageBlob``: no body, a size and a sequence number."""
    headers = call.request.headers
    declared = headers.get("content-length", "0")
    if declared != "0":
        raise bad_header("Content-Length", declared)
    size_text = headers.get("x-ms-blob-content-length")
    if size_text is None:
        raise _missing("x-ms-blob-content-length")
    if not size_text.isascii() or not size_text.isdigit():
        raise bad_header("x-ms-blob-content-length", size_text)
    record = await PageBlobs(call.service).create(
        call.key,
        int(size_text),
        _number(headers, "x-ms-blob-sequence-number") or 0,
        content_properties(headers, default_type="application/octet-stream", with_plain=True),
        request_metadata(call.request),
        call.create_conditions(),
        call.lease_id,
        tags=header_tags(headers),
        protect=await immutability.requested(call),
        tier=await _premium_tier(call),
    )
    return Response(201, [*etag_headers(record.ticks), _ENCRYPTED, *blobs.version_header(record)])


async def _premium_tier(call: Call) -> str | None:
    """``x-ms-access-tier`` of a page blob's Put Blob: in a premium page blob account a tier
    P4..P80 (a standard one is 400 InvalidBlobTier, recorded); elsewhere any tier, a premium
    one too, is 400 AccessTierNotSupportedForBlobType, as a standard account answers (recorded
    for the JS SDK's 'create with premium page blob tier')."""
    value = call.request.headers.get("x-ms-access-tier")
    if value is None:
        return None
    if not (await call.service.features.get(call.route.account)).premium_page_blobs:
        raise ServiceError("AccessTierNotSupportedForBlobType")
    return premium.parse_tier(value)


def _page_range(headers: dict[str, str], clear: bool) -> tuple[int, int]:
    """The range a Put Page writes, half-open: required, closed and on page boundaries. A bad
    range of a clear is named ``Range`` in the error whichever header carried it (recorded: the
    Go SDK's TestBlobClearPagesInvalidRange, x-ms-version 2023-11-03, ``x-ms-range:
    bytes=0-512``); an update keeps the header's own name (not recorded)."""
    key = "x-ms-range" if "x-ms-range" in headers else "range"
    if key not in headers:
        raise _missing("Range")
    name = "x-ms-range" if key == "x-ms-range" and not clear else "Range"
    wanted = byte_range(headers)
    if wanted is None or wanted[1] is None:
        raise bad_header(name, headers[key])
    return check_aligned(wanted[0], wanted[1], name)


async def put_page(call: Call) -> Response:
    _no_snapshot(call)
    headers = call.request.headers
    action = headers.get("x-ms-page-write")
    if action is None:
        raise _missing("x-ms-page-write")
    start, end = _page_range(headers, clear=action.lower() == "clear")
    request = PageWrite(
        conditions(headers),
        SequenceConditions(
            _condition(headers, "x-ms-if-sequence-number-le"),
            _condition(headers, "x-ms-if-sequence-number-lt"),
            _condition(headers, "x-ms-if-sequence-number-eq"),
        ),
        call.lease_id,
    )
    pages = PageBlobs(call.service)
    extra: Headers = []
    if action.lower() == "update":
        if end - start > MAX_PAGE_WRITE:
            raise ServiceError("RequestBodyTooLarge", fields=(("MaxLimit", str(MAX_PAGE_WRITE)),))
        upload = call.upload(MAX_PAGE_WRITE)
        if upload.length != end - start:  # a structured body's length is its content's
            raise bad_header(
                "x-ms-structured-content-length" if call.echo else "Content-Length", str(upload.length)
            )
        record, sums = await pages.upload_pages(
            call.key, start, end, upload.chunks, upload.md5, upload.crc64, request
        )
        extra = blobs.appended_checksums(sums, md5=upload.md5 is not None, version=call.version)
    elif action.lower() == "clear":
        declared = headers.get("content-length", "0")
        if declared != "0":
            raise bad_header("Content-Length", declared)
        record = await pages.clear_pages(call.key, start, end, request)
    else:
        raise bad_header("x-ms-page-write", action)
    response_headers = [*etag_headers(record.ticks), _sequence_header(record.sequence_number), *extra]
    if action.lower() == "update":
        response_headers.append(_ENCRYPTED)
    return Response(201, [*response_headers, *call.echo])


async def get_page_ranges(call: Call) -> Response:
    query, headers = call.request.query, call.request.headers
    if "x-ms-previous-snapshot-url" in headers:  # a managed disk's diff: there are none here
        raise unsupported_header("x-ms-previous-snapshot-url", headers["x-ms-previous-snapshot-url"])
    previous = query.get("prevsnapshot")
    answer = await PageBlobs(call.service).get_ranges(
        call.key,
        parse_snapshot(query.get("snapshot")),
        _previous(previous) if previous is not None else None,
        byte_range(headers),
        conditions(headers),
        call.lease_id,
        query.get("marker") or None,
        max_results(query) if "maxresults" in query else None,
    )
    record = answer.record
    extra = etag_headers(record.ticks)
    extra.append((b"x-ms-blob-content-length", str(record.size).encode()))
    paged = "marker" in query or "maxresults" in query
    return xml(render_page_list(answer.ranges, answer.next_marker, paged=paged), extra=extra)


def _previous(value: str) -> str:
    try:
        return parse_snapshot(value)
    except ServiceError:
        raise ServiceError(
            "InvalidQueryParameterValue",
            fields=(("QueryParameterName", "prevsnapshot"), ("QueryParameterValue", value)),
        ) from None


def render_page_list(ranges: list[PageRange], next_marker: str | None, *, paged: bool) -> bytes:
    """A ``PageList``: ``PageRange`` and ``ClearRange`` elements in order, then the marker when
    the listing was paged ("Get Page Ranges", 2020-10-02 and later). A line break follows the
    declaration, as Azure writes it (the .NET SDK's recording of GetPageRangesAsync, x-ms-version
    2024-08-04; the JS SDK's of Get Page Ranges and its diff, 2019-02-02 to 2021-04-10). An
    empty list not paged is ``<PageList />`` straight after the declaration (the JS SDK's nock
    recording of Get Page Ranges of a blob with no pages, x-ms-version 2019-12-12, July 2020)."""
    if not ranges and not paged and next_marker is None:
        return f"{DECLARATION}<PageList />".encode()
    parts = [DECLARATION, "\n<PageList>"]
    for start, last, kind in ranges:
        tag = "PageRange" if kind == "page" else "ClearRange"
        parts.append(f"<{tag}><Start>{start}</Start><End>{last}</End></{tag}>")
    if next_marker is not None:
        parts.append(f"<NextMarker>{next_marker}</NextMarker>")
    elif paged:
        parts.append("<NextMarker/>")  # written so, without a space, in Azure's recordings
    parts.append("</PageList>")
    return "".join(parts).encode()


async def set_page_blob_properties(call: Call) -> Response:
    """Set Blob Properties with a page blob's headers (resize, sequence number action)."""
    headers = call.request.headers
    size_text = headers.get("x-ms-blob-content-length")
    if size_text is not None and (not size_text.isascii() or not size_text.isdigit()):
        raise bad_header("x-ms-blob-content-length", size_text)
    given = any(name in headers for name in _CONTENT_HEADERS)
    record = await PageBlobs(call.service).set_properties(
        call.key,
        content_properties(headers, default_type=None, with_plain=False) if given else None,
        int(size_text) if size_text is not None else None,
        headers.get("x-ms-sequence-number-action"),
        _number(headers, "x-ms-blob-sequence-number"),
        conditions(headers),
        call.lease_id,
    )
    return Response(200, [*etag_headers(record.ticks), _sequence_header(record.sequence_number)])


async def incremental_copy(call: Call) -> Response:
    """Incremental Copy Blob. Azure always answers it ``pending`` (the SDK's own test expects
    that); here the copy is complete by then, as Get Blob Properties shows."""
    _no_snapshot(call)
    headers = call.request.headers
    source_url = headers.get("x-ms-copy-source")
    if source_url is None:
        raise _missing("x-ms-copy-source")
    if not copy_source.storage_blob_url(call, source_url):
        raise ServiceError("InvalidSourceBlobUrl")
    source = copy_source.locate(call, source_url)
    if source.key is None:
        raise copy_source.unreachable("Incremental Copy reads page blobs of this server only.")
    await copy_source.authorize_local(call, source, shared_key_ok=True)
    try:
        record = await PageBlobs(call.service).incremental_copy(
            source.key,
            source.snapshot,
            call.key,
            copy_source.recorded(source_url),
            conditions(headers),
            call.lease_id,
        )
    except ServiceError as exc:
        if exc.code != "CannotVerifyCopySource":
            raise
        # A missing source snapshot: Azure says which, as for Copy Blob (the source's 404
        # BlobNotFound in x-ms-copy-source-* and the document), with the source's own message.
        refused = copy_source.source_refused(404, "BlobNotFound", exc.message)
        refused.message = exc.message
        raise refused from None
    assert record.copy is not None
    response_headers = etag_headers(record.ticks)
    response_headers.append((b"x-ms-copy-id", record.copy.copy_id.encode()))
    response_headers.append((b"x-ms-copy-status", b"pending"))
    return Response(202, response_headers)
