"""Handlers of the blob operations and List Blobs: HTTP in, service call, HTTP out.

Content never passes through here whole: uploads go from the request's chunks to the store's
staging, downloads from the store's extents to the response as a stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tabulae.blob import encryption_guard
from tabulae.blob.api import arrow_listing, encryption, formats, immutability
from tabulae.blob.api.call import Call
from tabulae.blob.api.containers import includes, lease_request, lease_response, max_results, xml
from tabulae.blob.api.headers import (
    ContentOverrides,
    bad_header,
    blob_headers,
    byte_range,
    conditions,
    content_properties,
    etag_headers,
    http_seconds,
    overrides_from,
    version_or_snapshot,
)
from tabulae.blob.api.operations import invalid_parameter
from tabulae.blob.api.tags import header_tags
from tabulae.blob.namespace_guard import is_directory
from tabulae.blob.rules import premium, structured, tiers
from tabulae.blob.rules.blocks import check_block_id
from tabulae.blob.rules.checksums import CRC64_VERSION, Checksums, b64, decode_digest
from tabulae.blob.rules.conditions import Conditions
from tabulae.blob.rules.limits import MIB, max_append, max_block, max_put_blob
from tabulae.blob.rules.tiers import TierView, parse_priority, parse_tier
from tabulae.blob.service import BLOB_TYPES, parse_snapshot
from tabulae.http.messages import Headers, Response
from tabulae.http.metadata import metadata_headers, request_metadata
from tabulae.http.streaming import StreamedResponse
from tabulae.model.blobs import BASE, BlobRecord, Extent
from tabulae.model.errors import ServiceError

MAX_RANGE_CHECKSUM = 4 * MIB  # x-ms-range-get-content-md5 only for ranges up to this size
SMALL_RESPONSE = 64 * 1024  # content up to this size is sent as one body rather than streamed
_ARROW_STREAM = arrow_listing.ARROW_STREAM.encode()
_LIST_INCLUDES = frozenset(
    {"snapshots", "metadata", "uncommittedblobs", "copy", "deleted", "tags", "versions",
     "immutabilitypolicy", "legalhold", "deletedwithversions", "permissions"}
)  # fmt: skip
_ENCRYPTED: Headers = [(b"x-ms-request-server-encrypted", b"true")]
_NOT_ENCRYPTED: Headers = [(b"x-ms-request-server-encrypted", b"false")]  # a write of no content
# Snapshot Blob answers x-ms-request-server-encrypted from this version: none at 2018-03-28, false
# at 2018-11-09 (the JS SDK's nock recordings of 2019, on two accounts at 2018-03-28).
SNAPSHOT_ENCRYPTED_VERSION = "2018-11-09"
# Get Blob answers with the tier headers too from this version: Azure did at 2026-04-06 (the Rust
# SDK's recordings test_download_blob and test_gzip_blob_with_metadata_roundtrip), not at
# 2025-11-05 (test_blob_version_read_operations); versions between are not recorded
TIER_ON_GET_VERSION = "2026-04-06"


DELETE_TYPE_VERSION = "2017-07-29"  # x-ms-delete-type-permanent on Delete Blob's answer


def _snapshot(call: Call) -> str:
    return version_or_snapshot(call.request.query)


def _no_snapshot(call: Call) -> None:
    """Snapshots and versions are read-only: a write naming one is 400 InvalidOperation. A
    ``snapshot`` that is no snapshot time is refused first, as a read's is (recorded: the Go
    SDK's TestBlobSnapshotOfSnapshot, Snapshot Blob with ``snapshot=2021-01-01+01%3A01%3A01
    ++0000+UTC``, x-ms-version 2023-11-03: 400 InvalidQueryParameterValue naming it)."""
    if "snapshot" in call.request.query:
        parse_snapshot(call.request.query["snapshot"])
    if "snapshot" in call.request.query or "versionid" in call.request.query:
        raise ServiceError("InvalidOperation")


def _root_only(call: Call) -> None:
    """Put Blob, Set Blob Properties and Set Blob Metadata naming a snapshot: Azure answers 400
    InvalidQueryParameterValue for the ``snapshot`` parameter, with the value and the reason
    that the operation is only for the root blob (recorded for the Rust SDK's
    test_blob_snapshot_error_cases, x-ms-version 2025-11-05). Other writes on a snapshot, and
    these on a version, keep InvalidOperation: no recording shows Azure's answer to them."""
    value = call.request.query.get("snapshot")
    if value is not None:
        raise invalid_parameter(
            "snapshot",
            value,
            "This operation is only allowed on the root blob. Snapshot should not be provided.",
        )
    _no_snapshot(call)


def version_header(record: BlobRecord) -> Headers:
    """``x-ms-version-id`` of a write that made a version."""
    return [(b"x-ms-version-id", record.version_id.encode())] if record.version_id else []


async def requested_tier(call: Call) -> str | None:
    """``x-ms-access-tier`` of an upload or copy, when given: a standard tier, or in a premium
    page blob account a premium one (:func:`tier_in_account`)."""
    value = call.request.headers.get("x-ms-access-tier")
    return None if value is None else await tier_in_account(call, value)


async def tier_in_account(call: Call, value: str) -> str:
    """A tier header's value: P4..P80 in a premium page blob account (which holds no blob of a
    standard tier: Hot there is 400 InvalidBlobTier), else a standard tier of the version."""
    if await _premium_account(call):
        return premium.parse_tier(value)
    return parse_tier(value, call.version)


async def _premium_account(call: Call) -> bool:
    return (await call.service.features.get(call.route.account)).premium_page_blobs


async def _read_tier(call: Call, record: BlobRecord) -> TierView | None:
    if call.version < TIER_ON_GET_VERSION:
        return None
    return call.service.tier_view(record, await _premium_account(call))


def _overrides(call: Call) -> ContentOverrides:
    return overrides_from(call.grant.overrides) if call.grant is not None else ContentOverrides()


def checksum_headers(sums: Checksums, *, md5: bool, version: str) -> Headers:
    """A write's answered checksums: the Content-MD5 (when ``md5``) and the CRC64, which Azure
    answers only from :data:`CRC64_VERSION`."""
    headers: Headers = []
    if md5 and sums.md5 is not None:
        headers.append((b"content-md5", b64(sums.md5).encode()))
    if sums.crc64 is not None and version >= CRC64_VERSION:
        headers.append((b"x-ms-content-crc64", b64(sums.crc64).encode()))
    return headers


# From this version an Append Block or Put Page sent with a Content-MD5 answers the CRC64 beside
# it: Azure did at 2026-10-06 (azure-storage-blob's recording test_append_block_with_md5, June
# 2026) and did not at 2026-04-06 (the Rust SDK's append_blob_client/
# test_append_block_transactional_checksums, April 2026) nor at 2023-11-03 (the Go SDK's).
BOTH_SUMS_VERSION = "2026-10-06"


def appended_checksums(sums: Checksums, *, md5: bool, version: str) -> Headers:
    """The checksum an Append Block or a Put Page (update) answers: the Content-MD5 the request
    sent, checked, and before :data:`BOTH_SUMS_VERSION` no CRC64; without one, the CRC64 the
    service computed (recorded: the Go SDK's TestAppendBlockWithMD5 and TestPutPagesWithMD5
    answer Content-MD5 alone, its TestAppendBlockWithCRC64 and TestBlobClearPagesInvalidRange
    x-ms-content-crc64 alone, x-ms-version 2023-11-03). Put Block keeps both: its answer with an
    MD5 is not recorded."""
    if md5 and sums.md5 is not None and version < BOTH_SUMS_VERSION:
        return [(b"content-md5", b64(sums.md5).encode())]
    return checksum_headers(sums, md5=md5, version=version)


# ------------------------------------------------------------------------------ reads


async def get_blob(call: Call) -> Response:
    headers = call.request.headers
    snapshot = _snapshot(call)
    wanted = byte_range(headers)
    want_md5 = headers.get("x-ms-range-get-content-md5", "").lower() == "true"
    want_crc = headers.get("x-ms-range-get-content-crc64", "").lower() == "true"
    if want_md5 and want_crc:
        raise ServiceError("BothCrc64AndMd5RangeHeaderPresent")
    framing = headers.get(structured.HEADER_NAME)
    if framing is not None and structured.wanted(framing, call.version):
        if want_md5 or want_crc:  # one check of the content or the other
            name = "x-ms-range-get-content-md5" if want_md5 else "x-ms-range-get-content-crc64"
            raise bad_header(name, headers[name])
    else:
        framing = None
    record, extents = await call.service.get_blob(
        call.key, snapshot, conditions(headers), call.lease_id, content=True
    )
    assert extents is not None
    lease = call.service.lease_state(record.lease) if snapshot == BASE else None
    size = record.size
    if wanted is None:
        if want_md5 or want_crc:
            name = "x-ms-range-get-content-md5" if want_md5 else "x-ms-range-get-content-crc64"
            raise bad_header(name, headers[name])
        response_headers = blob_headers(
            record, lease, _overrides(call), whole=True, properties=False, tier=await _read_tier(call, record)
        )
        response_headers += await _protection_headers(call, record, read=True)
        if framing is not None:
            return _framed(call, extents, 0, size, 200, response_headers, framing)
        if size <= SMALL_RESPONSE:  # one write, no streaming machinery
            stream = call.service.read(call.key, extents, 0, size)
            return Response(200, response_headers, b"".join([chunk async for chunk in stream]))
        return StreamedResponse(
            200, response_headers, stream=call.service.stream(call.key, extents, 0, size), length=size
        )
    start, last = wanted
    if start >= size:
        raise ServiceError("InvalidRange", headers=[(b"content-range", f"bytes */{size}".encode())])
    end = size if last is None or last >= size else last + 1
    response_headers = blob_headers(
        record, lease, _overrides(call), whole=False, properties=False, tier=await _read_tier(call, record)
    )
    response_headers += await _protection_headers(call, record, read=True)
    response_headers.append((b"content-range", f"bytes {start}-{end - 1}/{size}".encode()))
    if framing is not None:
        return _framed(call, extents, start, end, 206, response_headers, framing)
    if end - start <= SMALL_RESPONSE and not (want_md5 or want_crc):
        stream = call.service.read(call.key, extents, start, end)
        return Response(206, response_headers, b"".join([chunk async for chunk in stream]))
    if want_md5 or want_crc:
        if end - start > MAX_RANGE_CHECKSUM:
            name = "x-ms-range-get-content-md5" if want_md5 else "x-ms-range-get-content-crc64"
            raise ServiceError("OutOfRangeInput", fields=(("HeaderName", name), ("HeaderValue", "true")))
        stream = call.service.read(call.key, extents, start, end)
        data = b"".join([chunk async for chunk in stream])  # at most 4 MiB
        sums = Checksums(md5=want_md5, crc64=want_crc)
        sums.update(data)
        response_headers.extend(checksum_headers(sums, md5=True, version=call.version))
        return StreamedResponse(206, response_headers, stream=_once(data), length=len(data))
    return StreamedResponse(
        206, response_headers, stream=call.service.stream(call.key, extents, start, end), length=end - start
    )


def _framed(
    call: Call, extents: Sequence[Extent], start: int, end: int, status: int, headers: Headers, framing: str
) -> Response:
    """Bytes ``[start, end)`` as a structured message (blob/rules/structured.py), for a Get Blob
    with ``x-ms-structured-body``: Content-Length is the message's, Content-Range and
    ``x-ms-structured-content-length`` the content's. The content is read, not sent from its
    file, as its CRC64s are computed on the way out."""
    headers.append((structured.HEADER_NAME.encode(), framing.encode()))
    headers.append((structured.LENGTH_HEADER_NAME.encode(), str(end - start).encode()))
    content = call.service.read(call.key, extents, start, end)
    return StreamedResponse(
        status,
        headers,
        stream=structured.frame(content, end - start),
        length=structured.encoded_length(end - start),
    )


async def _once(data: bytes):  # type: ignore[no-untyped-def]
    yield data


async def get_blob_properties(call: Call) -> Response:
    snapshot = _snapshot(call)
    record, _ = await call.service.get_blob(
        call.key, snapshot, conditions(call.request.headers), call.lease_id, content=False
    )
    lease = call.service.lease_state(record.lease) if snapshot == BASE else None
    tier = call.service.tier_view(record, await _premium_account(call))
    if not tiers.shows_tier(record, call.version):
        tier = None
    headers = blob_headers(record, lease, _overrides(call), whole=True, properties=True, tier=tier)
    headers += await _protection_headers(call, record, read=False)
    return StreamedResponse(200, headers, stream=None, length=record.size)


async def _protection_headers(call: Call, record: BlobRecord, *, read: bool) -> Headers:
    """Encryption headers, once the request names the blob's key (blob/api/encryption.py), then
    immutability and last access headers (blob/api/immutability.py)."""
    headers = encryption.read_headers(record, encryption_guard.REQUEST.get())
    return (
        headers
        + immutability.response_headers(record)
        + await immutability.last_access_header(call, record, read=read)
    )


async def get_blob_metadata(call: Call) -> Response:
    record, _ = await call.service.get_blob(
        call.key, _snapshot(call), conditions(call.request.headers), call.lease_id, content=False
    )
    checked = encryption.read_headers(record, encryption_guard.REQUEST.get())
    return Response(200, etag_headers(record.ticks) + metadata_headers(record.metadata) + checked)


async def get_block_list(call: Call) -> Response:
    which = call.request.query.get("blocklisttype", "committed").lower()
    if which not in ("committed", "uncommitted", "all"):
        raise invalid_parameter("blocklisttype", call.request.query["blocklisttype"])
    if_tags = conditions(call.request.headers).if_tags  # its one condition ("Get Block List")
    record, committed, staged = await call.service.get_block_list(
        call.key, _snapshot(call), call.lease_id, Conditions(if_tags=if_tags)
    )
    extra: Headers = []
    if record.committed:
        extra = etag_headers(record.ticks)
        extra.append((b"x-ms-blob-content-length", str(record.size).encode()))
    body = formats.render_block_list(
        committed if which in ("committed", "all") else None,
        staged if which in ("uncommitted", "all") else None,
    )
    return xml(body, extra=extra)


def _soft_deleted_base(record: BlobRecord) -> bool:
    """A soft-deleted base blob, kept aside (its snapshot key starts with ``~``): listed with the
    tier it had, and in a flat account an empty ``<LeaseStatus />``, as Azure lists them (the JS
    SDK's nock recordings of List Blobs include=deleted, x-ms-version 2018-03-28 to 2019-12-12:
    ``<AccessTier>Hot</AccessTier><AccessTierInferred>true</AccessTierInferred><LeaseStatus />``;
    an HNS account's deleted paths show the tier and no lease, recorded at 2023-08-03)."""
    return record.deleted_time is not None and record.snapshot.startswith("~")


async def list_blobs(call: Call) -> Response:
    query = call.request.query
    include = includes(query, _LIST_INCLUDES)
    page = await call.service.list_blobs(
        call.route.account,
        call.route.container,
        prefix=query.get("prefix", ""),
        delimiter=query.get("delimiter") or None,
        marker=query.get("marker") or None,
        limit=max_results(query),
        snapshots="snapshots" in include,
        uncommitted="uncommittedblobs" in include,
        versions="versions" in include,
        deleted="deleted" in include,
        with_versions="deletedwithversions" in include,
        start_from=query.get("startFrom") or None,
        end_before=query.get("endBefore") or None,
    )
    features = await call.service.features.get(call.route.account)
    items: list = []
    for item in page.items:
        if isinstance(item, str):
            items.append(item)
        else:
            lease = call.service.lease_state(item.lease) if not item.snapshot else None
            if _soft_deleted_base(item) and not features.hns:
                lease = formats.SOFT_DELETED_LEASE
            items.append((item, lease))
    tracked, premium_account = features.last_access_tracking, features.premium_page_blobs

    def tier_view(record: BlobRecord, premium: bool) -> TierView | None:
        if _soft_deleted_base(record):  # kept aside uncommitted, listed with the tier it had
            record = replace(record, committed=True)
        return call.service.tier_view(record, premium)

    body = formats.render_blobs(
        call.route.base,
        call.route.container,
        query,
        items,
        include,
        page.next_marker,
        tier_of=lambda record: (
            formats.tier_elements(tier_view(record, premium_account))
            if tiers.shows_tier(record, call.version)
            else ""
        ),
        remaining_days=call.service.remaining_days,
        extra_of=lambda record: immutability.listing_elements(record, include),
        accessed_of=immutability.last_access_element if tracked else None,
        versions_only=page.versions_only,
        crc64=call.version >= CRC64_VERSION,
        directory_of=is_directory if features.hns else None,
    )
    if arrow_listing.wanted(call.request.headers.get("accept")):
        return Response(200, [(b"content-type", _ARROW_STREAM)], arrow_listing.transcode(body))
    return xml(body)


# ------------------------------------------------------------------------------ writes


async def put_blob(call: Call) -> Response:
    _root_only(call)
    headers = call.request.headers
    blob_type = headers.get("x-ms-blob-type")
    if blob_type is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-blob-type"),))
    if blob_type not in BLOB_TYPES:
        raise bad_header("x-ms-blob-type", blob_type)
    if blob_type == "BlockBlob" and await _premium_account(call):
        raise ServiceError("BlobTypeNotSupported")  # page blobs only (recorded, 2017 and 2022)
    if blob_type == "AppendBlob":
        upload = call.upload(0)
    else:
        upload = call.upload(max_put_blob(call.version))
        stored_md5 = _digest_or_none(headers.get("x-ms-blob-content-md5"))
        if stored_md5 is not None and upload.md5 is None:
            upload.md5 = stored_md5  # an MD5 the blob is to keep is checked against the body too
    record, sums = await call.service.put_blob(
        call.key,
        blob_type,
        upload,
        content_properties(headers, default_type="application/octet-stream", with_plain=True),
        request_metadata(call.request),
        call.create_conditions(),
        call.lease_id,
        tags=header_tags(headers),
        tier=await requested_tier(call),
        protect=await immutability.requested(call),
    )
    response_headers = etag_headers(record.ticks) + _ENCRYPTED + version_header(record)
    if blob_type == "BlockBlob":
        response_headers.extend(checksum_headers(sums, md5=True, version=call.version))
    return Response(201, [*response_headers, *call.echo])


async def put_block(call: Call) -> Response:
    _no_snapshot(call)
    block_id = check_block_id(call.request.query.get("blockid"))
    upload = call.upload(max_block(call.version))
    sums = await call.service.put_block(call.key, block_id, upload, call.lease_id)
    return Response(
        201,
        [*checksum_headers(sums, md5=upload.md5 is not None, version=call.version), *_ENCRYPTED, *call.echo],
    )


async def put_block_list(call: Call) -> Response:
    _no_snapshot(call)
    headers = call.request.headers
    body = await call.document()
    sums = Checksums(md5=True, crc64=True)
    sums.update(body)
    sums.verify(
        decode_digest(headers.get("content-md5"), 16, "Content-MD5"),
        decode_digest(headers.get("x-ms-content-crc64"), 8, "x-ms-content-crc64"),
    )
    entries = formats.parse_block_list(body)
    record = await call.service.put_block_list(
        call.key,
        entries,
        content_properties(headers, default_type="application/octet-stream", with_plain=False),
        request_metadata(call.request),
        call.create_conditions(),
        call.lease_id,
        tags=header_tags(headers),
        tier=await requested_tier(call),
        protect=await immutability.requested(call),
    )
    return Response(
        201,
        etag_headers(record.ticks)
        + checksum_headers(sums, md5=False, version=call.version)
        + _ENCRYPTED
        + version_header(record),
    )


def _digest_or_none(value: str | None) -> bytes | None:
    """A Base64 MD5, or None when the value is not one (then it is only stored)."""
    try:
        return decode_digest(value, 16, "Content-MD5")
    except ServiceError:
        return None


def _int_header(headers: dict[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    if not value.isdigit():
        raise bad_header(name, value)
    return int(value)


async def append_block(call: Call) -> Response:
    _no_snapshot(call)
    headers = call.request.headers
    upload = call.upload(max_append(call.version))
    if upload.length == 0:  # Azure appends no empty block: 400 InvalidHeaderValue naming Content-Length
        raise bad_header("Content-Length", "0")
    record, offset, sums = await call.service.append_block(
        call.key,
        upload,
        conditions(headers),
        call.lease_id,
        _int_header(headers, "x-ms-blob-condition-maxsize"),
        _int_header(headers, "x-ms-blob-condition-appendpos"),
    )
    response_headers = etag_headers(record.ticks)
    response_headers.append((b"x-ms-blob-append-offset", str(offset).encode()))
    response_headers.append((b"x-ms-blob-committed-block-count", str(record.block_count).encode()))
    response_headers.extend(appended_checksums(sums, md5=upload.md5 is not None, version=call.version))
    return Response(201, [*response_headers, *_ENCRYPTED, *call.echo])


async def set_blob_properties(call: Call) -> Response:
    _root_only(call)
    headers = call.request.headers
    record = await call.service.set_blob_properties(
        call.key,
        content_properties(headers, default_type=None, with_plain=False),
        conditions(headers),
        call.lease_id,
    )
    return Response(200, etag_headers(record.ticks))


async def set_blob_metadata(call: Call) -> Response:
    _root_only(call)
    headers = call.request.headers
    record = await call.service.set_blob_metadata(
        call.key, request_metadata(call.request), conditions(headers), call.lease_id
    )
    return Response(200, etag_headers(record.ticks) + _ENCRYPTED + version_header(record))


async def delete_blob(call: Call) -> Response:
    """Delete Blob: 202 with ``x-ms-delete-type-permanent`` (from version 2017-07-29), whether
    the blob is gone for good or soft-deleted; ``deletetype=permanent`` (the only value) removes
    a soft-deleted snapshot or version for good instead."""
    headers = call.request.headers
    delete_type = call.request.query.get("deletetype")
    if delete_type is not None and delete_type.lower() != "permanent":
        raise invalid_parameter("deletetype", delete_type)
    permanent = delete_type is not None
    option = headers.get("x-ms-delete-snapshots")
    if option is not None and option not in ("include", "only"):
        raise bad_header("x-ms-delete-snapshots", option)
    if call.grant is not None:
        call.grant.check_delete("versionid" in call.request.query, permanent)
    snapshot = _snapshot(call)
    if option is not None and "versionid" in call.request.query:
        raise _versions_have_no_snapshots(call.request.query["versionid"])
    if permanent:
        if option is not None and snapshot != BASE:
            raise invalid_parameter("snapshot", call.request.query.get("snapshot", ""))
        await call.service.permanent_delete(call.key, snapshot, conditions(headers))
        gone = True
    else:
        tier_since = (
            http_seconds(headers.get("x-ms-access-tier-if-modified-since")),
            http_seconds(headers.get("x-ms-access-tier-if-unmodified-since")),
        )
        gone = await call.service.delete_blob(
            call.key, snapshot, option, conditions(headers), call.lease_id, tier_since=tier_since
        )
    if call.version < DELETE_TYPE_VERSION:
        return Response(202)
    return Response(202, [(b"x-ms-delete-type-permanent", b"true" if gone else b"false")])


def _versions_have_no_snapshots(version: str) -> ServiceError:
    """Delete Blob naming a version with ``x-ms-delete-snapshots``: Azure refuses the
    ``versionid`` parameter, 400 InvalidQueryParameterValue with the id as sent and the reason
    that the option is for the root blob (recorded: the JS SDK's blob_versioning test 'deleting a
    blob with both deleteSnapshots and versionId option should fail', include and only,
    x-ms-version 2026-02-06, 494 bytes), before looking the version up."""
    return invalid_parameter(
        "versionid",
        version,
        "This operation is only allowed on the root blob. Version id should not be provided.",
    )


async def snapshot_blob(call: Call) -> Response:
    _no_snapshot(call)
    headers = call.request.headers
    given = request_metadata(call.request)
    base, name = await call.service.snapshot_blob(
        call.key, given if given else None, conditions(headers), call.lease_id
    )
    response_headers = etag_headers(base.ticks)
    response_headers.append((b"x-ms-snapshot", name.encode()))
    encrypted = _NOT_ENCRYPTED if call.version >= SNAPSHOT_ENCRYPTED_VERSION else []
    return Response(201, response_headers + encrypted + version_header(base))


async def lease_blob(call: Call) -> Response:
    _no_snapshot(call)
    request = lease_request(call.request)
    outcome = await call.service.lease_blob(call.key, request, conditions(call.request.headers))
    return lease_response(request, outcome)


def bool_header(headers: dict[str, str], name: str) -> bool | None:
    value = headers.get(name)
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise bad_header(name, value)
    return value.lower() == "true"


async def set_blob_tier(call: Call) -> Response:
    """Set Blob Tier (on the blob or, with ``snapshot``, one of its snapshots): 200 or 202."""
    headers = call.request.headers
    value = headers.get("x-ms-access-tier")
    if value is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-access-tier"),))
    status = await call.service.set_blob_tier(
        call.key,
        _snapshot(call),
        await tier_in_account(call, value),
        parse_priority(headers.get("x-ms-rehydrate-priority")),
        call.lease_id,
        Conditions(if_tags=conditions(headers).if_tags),  # its one condition ("Set Blob Tier")
    )
    return Response(status)


async def undelete_blob(call: Call) -> Response:
    """Undelete Blob: 200 (see :mod:`tabulae.blob.softdeletion`)."""
    _no_snapshot(call)
    await call.service.undelete_blob(call.key)
    return Response(200)


async def seal_blob(call: Call) -> Response:
    """Append Blob Seal: 200 with the new ETag and ``x-ms-blob-sealed: true``."""
    _no_snapshot(call)
    headers = call.request.headers
    record = await call.service.seal_blob(
        call.key, conditions(headers), call.lease_id, _int_header(headers, "x-ms-blob-condition-appendpos")
    )
    return Response(200, [*etag_headers(record.ticks), (b"x-ms-blob-sealed", b"true")])
