"""Handlers of the copies from a URL: Put Blob From URL, Put Block From URL, Append Block From
URL, Put Page From URL, Copy Blob (asynchronous, pending while a source outside this server
streams in) and Copy Blob From URL (``x-ms-requires-sync: true``), and Abort Copy Blob.

The source is found, authorised and opened by :mod:`.copy_source`; its bytes then go through
the same service writes as an upload's body (the destination's conditions, lease and limits
are the upload's), so a copy is never half applied. Copy Blob from this server's own store
stays instant: the store shares the source's extents rather than copying bytes.

Tags (``x-ms-tags``, or the source's with ``x-ms-copy-source-tag-option: COPY``) and tiers
(``x-ms-access-tier``) on these operations pass to the same service calls the ordinary uploads
use; a pending copy carries them from its start, so the finished copy has them.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from tabulae.blob.api import background_copy, immutability
from tabulae.blob.api.blobs import bool_header, checksum_headers, requested_tier, version_header
from tabulae.blob.api.call import Call
from tabulae.blob.api.copy_source import (
    Source,
    SourceRead,
    authorize_local,
    locate,
    open_remote,
    open_source,
    recorded,
    source_range,
    source_refused,
)
from tabulae.blob.api.headers import bad_header, byte_range, conditions, content_properties, etag_headers
from tabulae.blob.api.operations import invalid_parameter
from tabulae.blob.api.tags import header_tags
from tabulae.blob.pageblobs import PageBlobs, PageWrite
from tabulae.blob.rules import copies
from tabulae.blob.rules.blocks import check_block_id
from tabulae.blob.rules.checksums import decode_digest
from tabulae.blob.rules.conditions import not_met
from tabulae.blob.rules.limits import MAX_BLOCK_BLOB, max_append, max_block, max_put_blob
from tabulae.blob.rules.pages import MAX_PAGE_WRITE, SequenceConditions, check_aligned, parse_sequence_number
from tabulae.blob.rules.tags import copy_source_tags
from tabulae.blob.rules.tiers import parse_priority
from tabulae.blob.service import APPEND_BLOB, BLOCK_BLOB, Upload
from tabulae.http.fetch import Fetched
from tabulae.http.messages import Headers, Response
from tabulae.http.metadata import request_metadata
from tabulae.model.blobs import ContentProperties, CopyState
from tabulae.model.errors import ServiceError

_ENCRYPTED: Headers = [(b"x-ms-request-server-encrypted", b"true")]
_BLOB_HEADERS = {
    "content_type": "x-ms-blob-content-type",
    "content_encoding": "x-ms-blob-content-encoding",
    "content_language": "x-ms-blob-content-language",
    "content_disposition": "x-ms-blob-content-disposition",
    "cache_control": "x-ms-blob-cache-control",
    "content_md5": "x-ms-blob-content-md5",
}


def _no_snapshot(call: Call) -> None:
    """A copy's destination is never a snapshot (read-only): 400 InvalidOperation."""
    if "snapshot" in call.request.query:
        raise ServiceError("InvalidOperation")


def _source_md5(headers: dict[str, str]) -> bytes | None:
    return decode_digest(headers.get("x-ms-source-content-md5"), 16, "x-ms-source-content-md5")


def _source_crc64(headers: dict[str, str]) -> bytes | None:
    return decode_digest(headers.get("x-ms-source-content-crc64"), 8, "x-ms-source-content-crc64")


def _int_header(headers: dict[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    if not value.isdigit():
        raise bad_header(name, value)
    return int(value)


def _merged_properties(headers: dict[str, str], source: ContentProperties) -> ContentProperties:
    """The source's properties, each replaced by the request's ``x-ms-blob-*`` header when it has one."""
    given = {name: headers[header] for name, header in _BLOB_HEADERS.items() if header in headers}
    return replace(source, **given)


def _copy_headers(copy: CopyState) -> Headers:
    return [(b"x-ms-copy-id", copy.copy_id.encode()), (b"x-ms-copy-status", copy.status.encode())]


# ------------------------------------------------------------------------------ From URL


async def _open_telling(
    call: Call, *, ranged: bool, limit: int, unmet: str | None = None
) -> tuple[Source, SourceRead, Fetched | None]:
    """:func:`open_source` for the copies whose refusal says the source's own words in its
    ``<Message>`` (Put Blob, Put Block and Copy Blob From URL, recorded for the .NET SDK:
    SyncUploadFromUriAsync_SourceBearerTokenFail, StageBlobFromUriAsync_SourceErrorAndStatusCode,
    SyncCopyFromUriAsync_Error); Append Block and Put Page From URL keep the generic message, as
    theirs show. A source that gave no message (a 304, no answer) keeps it too."""
    try:
        return await open_source(call, ranged=ranged, limit=limit, unmet=unmet)
    except ServiceError as exc:
        said = dict(exc.fields).get("CopySourceErrorMessage")
        if exc.code == "CannotVerifyCopySource" and said and exc.status != 500:
            exc.message = said
        raise


async def put_blob_from_url(call: Call) -> Response:
    """Put Blob From URL: a block blob made of the source's bytes, replacing the destination."""
    _no_snapshot(call)
    headers = call.request.headers
    blob_type = headers.get("x-ms-blob-type", "")
    if blob_type != BLOCK_BLOB:
        raise bad_header("x-ms-blob-type", blob_type)
    _source, read, fetched = await _open_telling(
        call, ranged=False, limit=max_put_blob(call.version), unmet="SourceConditionNotMet"
    )
    target = call.create_conditions()
    try:
        if headers.get("x-ms-copy-source-blob-properties", "true").lower() == "false":
            properties = content_properties(
                headers, default_type="application/octet-stream", with_plain=False
            )
        else:
            properties = _merged_properties(headers, replace(read.properties, content_md5=None))
        upload = Upload(read.chunks, read.length, _source_md5(headers), _source_crc64(headers))
        tags = copy_source_tags(headers.get("x-ms-copy-source-tag-option"), header_tags(headers), read.tags)
        try:
            record, sums = await call.service.put_blob(
                call.key, BLOCK_BLOB, upload, properties, request_metadata(call.request),
                target, call.lease_id, tier=await requested_tier(call), tags=tags,
            )  # fmt: skip
        except ServiceError as exc:
            # The destination's ETag conditions unmet: Azure's TargetConditionNotMet (recorded
            # for the JS SDK's syncUploadFromURL with If-Match, x-ms-version 2021-08-06); its
            # date conditions keep ConditionNotMet (recorded the same month at the same version
            # for the Python SDK's upload_blob_from_url with If-(Un)Modified-Since), as does an
            # x-ms-if-tags one, as Copy Blob's does. Both kinds sent and one unmet: which one is
            # not told apart here, and the ETag's code is given.
            etags = target.if_match is not None or target.if_none_match is not None
            if exc.code == "ConditionNotMet" and target.if_tags is None and etags:
                raise not_met(412, "TargetConditionNotMet") from None
            raise
    finally:
        if fetched is not None:
            await fetched.close()
    headers_out = (
        etag_headers(record.ticks)
        + checksum_headers(sums, md5=True, version=call.version)
        + version_header(record)
    )
    return Response(201, headers_out + _ENCRYPTED)


async def put_block_from_url(call: Call) -> Response:
    """Put Block From URL: a staged block made of the source's bytes (``x-ms-source-range``)."""
    _no_snapshot(call)
    headers = call.request.headers
    block_id = check_block_id(call.request.query.get("blockid"))
    _source, read, fetched = await _open_telling(call, ranged=True, limit=max_block(call.version))
    try:
        upload = Upload(read.chunks, read.length, _source_md5(headers), _source_crc64(headers))
        sums = await call.service.put_block(call.key, block_id, upload, call.lease_id)
    finally:
        if fetched is not None:
            await fetched.close()
    return Response(
        201, checksum_headers(sums, md5=upload.md5 is not None, version=call.version) + _ENCRYPTED
    )


def _without_md5_values(error: ServiceError) -> ServiceError:
    """Append Block and Put Page From URL answer an unmet ``x-ms-source-content-md5`` with the bare
    Md5Mismatch document, naming neither value, as Azure's recordings for the .NET SDK show
    (AppendBlockFromUriAsync_MD5_Fail, UploadPagesFromUriAsync_MD5_Fail); Put Block From URL,
    like the uploads, names both."""
    if error.code == "Md5Mismatch":
        error.fields = ()
    return error


async def append_block_from_url(call: Call) -> Response:
    """Append Block From URL: the source's bytes (``x-ms-source-range``) appended as one block."""
    _no_snapshot(call)
    headers = call.request.headers
    _source, read, fetched = await open_source(call, ranged=True, limit=max_append(call.version))
    try:
        upload = Upload(read.chunks, read.length, _source_md5(headers), _source_crc64(headers))
        record, offset, sums = await call.service.append_block(
            call.key,
            upload,
            conditions(headers),
            call.lease_id,
            _int_header(headers, "x-ms-blob-condition-maxsize"),
            _int_header(headers, "x-ms-blob-condition-appendpos"),
        )
    except ServiceError as exc:
        raise _without_md5_values(exc) from None
    finally:
        if fetched is not None:
            await fetched.close()
    response_headers = etag_headers(record.ticks)
    response_headers.append((b"x-ms-blob-append-offset", str(offset).encode()))
    response_headers.append((b"x-ms-blob-committed-block-count", str(record.block_count).encode()))
    response_headers.extend(checksum_headers(sums, md5=upload.md5 is not None, version=call.version))
    return Response(201, response_headers + _ENCRYPTED)


async def put_page_from_url(call: Call) -> Response:
    """Put Page From URL: the source's bytes (``x-ms-source-range``, as long as ``x-ms-range``)
    written as pages of a page blob, with Put Page's conditions, sequence numbers and lease."""
    _no_snapshot(call)
    headers = call.request.headers
    action = headers.get("x-ms-page-write")
    if action is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-page-write"),))
    if action.lower() != "update":
        raise bad_header("x-ms-page-write", action)
    name = "x-ms-range" if "x-ms-range" in headers else "range"
    wanted = byte_range(headers)
    if wanted is None or wanted[1] is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-range"),))
    start, end = check_aligned(wanted[0], wanted[1], name)
    if end - start > MAX_PAGE_WRITE:
        raise bad_header(name, headers[name])
    given = source_range(headers)
    if given is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-source-range"),))
    if given[1] is None or given[1] - given[0] + 1 != end - start:
        raise bad_header("x-ms-source-range", headers["x-ms-source-range"])

    def number(header: str) -> int | None:
        value = headers.get(header)
        return None if value is None else parse_sequence_number(value, header)

    request = PageWrite(
        conditions(headers),
        SequenceConditions(
            number("x-ms-if-sequence-number-le"),
            number("x-ms-if-sequence-number-lt"),
            number("x-ms-if-sequence-number-eq"),
        ),
        call.lease_id,
    )
    _source, read, fetched = await open_source(call, ranged=True, limit=MAX_PAGE_WRITE)
    try:
        if read.length != end - start:
            raise source_refused(
                416, "InvalidRange", "The range specified is invalid for the current size of the resource."
            )
        md5 = _source_md5(headers)
        record, sums = await PageBlobs(call.service).upload_pages(
            call.key, start, end, read.chunks, md5, _source_crc64(headers), request
        )
    except ServiceError as exc:
        raise _without_md5_values(exc) from None
    finally:
        if fetched is not None:
            await fetched.close()
    response_headers = etag_headers(record.ticks)
    response_headers.append((b"x-ms-blob-sequence-number", str(record.sequence_number).encode()))
    response_headers.extend(checksum_headers(sums, md5=md5 is not None, version=call.version))
    return Response(201, response_headers + _ENCRYPTED)


# ------------------------------------------------------------------------------ Copy Blob


def _target_not_met(error: ServiceError, call: Call) -> ServiceError:
    """Copy Blob's answer when the destination's If-Match, If-None-Match, If-Modified-Since or
    If-Unmodified-Since is unmet: 412 TargetConditionNotMet (recorded: the Go SDK's
    TestBlobStartCopyDest{IfMatch,IfNoneMatch,IfModifiedSince,IfUnmodifiedSince}False,
    x-ms-version 2023-11-03, 265 bytes). An x-ms-if-tags or x-ms-source-if-tags one keeps
    ConditionNotMet, as before; other errors pass through."""
    headers = call.request.headers
    target = call.create_conditions()
    dated = target.if_modified_since is not None or target.if_unmodified_since is not None
    etags = target.if_match is not None or target.if_none_match is not None
    tagged = target.if_tags is not None or "x-ms-source-if-tags" in headers
    if error.code == "ConditionNotMet" and (dated or etags) and not tagged:
        return not_met(412, "TargetConditionNotMet")
    return error


def _unauthenticated_source(error: ServiceError) -> ServiceError:
    """Copy Blob's answer when a source of this server would not let the request read it:
    CannotVerifyCopySource in the source's words. Without credentials (401) with nothing else of
    the source's (recorded: the Go SDK's TestBlobStartCopySourcePrivate, a private blob of another
    account, x-ms-version 2023-11-03, 297 bytes); refused for its SAS's permissions (403, "This
    request is not authorized to perform this operation using this permission.", as Azure
    answered the .NET SDK's StartCopyFromUriAsync with a source SAS of sp=c or sp=d, Azure/Azurite#2317)
    keeping the source's status, code and message fields, whose presence there is not on record."""
    if error.code != "CannotVerifyCopySource":
        return error
    said = dict(error.fields).get("CopySourceErrorMessage") or error.message
    if error.status != 401:
        error.message = said
        return error
    plain = ServiceError("CannotVerifyCopySource", said)
    plain.status = 401
    return plain


async def copy_blob(call: Call) -> Response:
    """Copy Blob: instant from this server's store, pending from outside it; with
    ``x-ms-requires-sync: true`` it is Copy Blob From URL, completed before the answer."""
    _no_snapshot(call)
    headers = call.request.headers
    sync = headers.get("x-ms-requires-sync")
    if sync is not None and sync.lower() not in ("true", "false"):
        raise bad_header("x-ms-requires-sync", sync)
    if sync is not None and sync.lower() == "true":
        return await _copy_from_url(call)
    url = headers["x-ms-copy-source"]
    given = request_metadata(call.request)
    source = locate(call, url)
    if source.key is not None:
        try:
            await authorize_local(call, source, shared_key_ok=True)
        except ServiceError as exc:
            raise _unauthenticated_source(exc) from None
        tier = await requested_tier(call)
        try:
            record = await call.service.copy_blob(
                source.key, source.snapshot, call.key, recorded(url), given if given else None,
                call.create_conditions(), conditions(headers, "x-ms-source-"), call.lease_id,
                tags=header_tags(headers),
                tier=tier, priority=parse_priority(headers.get("x-ms-rehydrate-priority")),
                seal=bool_header(headers, "x-ms-seal-blob"), protect=await immutability.requested(call),
            )  # fmt: skip
        except ServiceError as exc:
            if exc.code == "CannotVerifyCopySource" and source.key.account == call.route.account:
                # a missing source of the same account is the destination's own 404 BlobNotFound
                # (recorded: the Go SDK's TestBlobStartCopySourceNonExistent, 2023-11-03, and
                # .NET's StartCopyFromUriAsync_Error, 2021-06-08, 215 bytes)
                raise ServiceError("BlobNotFound") from None
            if exc.code == "CannotVerifyCopySource":
                raise source_refused(404, "BlobNotFound", "The specified blob does not exist.") from None
            if exc.code == "BlobUsesCustomerSpecifiedEncryption":  # the source's key, which it cannot name
                # assumed: the From URL copies' answer; no recording of this Copy Blob was found
                raise source_refused(exc.status, exc.code, exc.message) from None
            raise _target_not_met(exc, call) from None
        assert record.copy is not None
        return Response(202, etag_headers(record.ticks) + _copy_headers(record.copy) + version_header(record))
    tier = await requested_tier(call)
    fetched, read = await open_remote(call, source, None, MAX_BLOCK_BLOB)
    try:
        blob_type = APPEND_BLOB if read.blob_type == APPEND_BLOB else BLOCK_BLOB
        record = await call.service.start_pending_copy(
            call.key, blob_type, read.properties, given if given else read.metadata, call.create_conditions(),
            call.lease_id, recorded(url), read.length, tags=header_tags(headers), tier=tier,
        )  # fmt: skip
    except ServiceError as exc:
        await fetched.close()
        raise _target_not_met(exc, call) from None
    except BaseException:
        await fetched.close()
        raise
    assert record.copy is not None
    background_copy.start(call.service, call.key, record.copy.copy_id, fetched, read.chunks, read.length)
    return Response(202, etag_headers(record.ticks) + _copy_headers(record.copy) + version_header(record))


async def _copy_from_url(call: Call) -> Response:
    """Copy Blob From URL: the source (256 MiB at most) copied into a block blob before the
    answer; the source is authorised as the From URL operations' are (never by the key)."""
    headers = call.request.headers
    url = headers["x-ms-copy-source"]
    _source, read, fetched = await _open_telling(call, ranged=False, limit=MAX_BLOCK_BLOB)
    try:
        if read.length > copies.MAX_SYNC_COPY:
            error = ServiceError(
                "CannotVerifyCopySource",
                "The source is larger than 256 MiB, the most Copy Blob From URL copies; use Copy Blob.",
            )
            error.status = 409
            raise error
        given = request_metadata(call.request)
        properties = replace(read.properties, content_md5=None)
        copy = CopyState(str(uuid.uuid4()), recorded(url), "", 0)
        upload = Upload(read.chunks, read.length, _source_md5(headers), _source_crc64(headers))
        tags = copy_source_tags(headers.get("x-ms-copy-source-tag-option"), header_tags(headers), read.tags)
        record, sums = await call.service.copy_from_upload(
            call.key, upload, properties, given if given else read.metadata, call.create_conditions(),
            call.lease_id, copy, tags=tags, tier=await requested_tier(call),
        )  # fmt: skip
    finally:
        if fetched is not None:
            await fetched.close()
    assert record.copy is not None and sums.md5 is not None and sums.crc64 is not None
    response_headers = etag_headers(record.ticks) + _copy_headers(record.copy) + version_header(record)
    response_headers.extend(checksum_headers(sums, md5=upload.md5 is not None, version=call.version))
    return Response(202, response_headers + _ENCRYPTED)


async def abort_copy(call: Call) -> Response:
    _no_snapshot(call)
    headers = call.request.headers
    if headers.get("x-ms-copy-action", "").lower() != "abort":
        raise bad_header("x-ms-copy-action", headers.get("x-ms-copy-action", ""))
    copy_id = call.request.query.get("copyid")
    if not copy_id:
        raise ServiceError("MissingRequiredQueryParameter", fields=(("QueryParameterName", "copyid"),))
    _check_copy_id(copy_id)
    await call.service.abort_copy(call.key, copy_id, call.lease_id)
    background_copy.stop(call.key, copy_id)
    return Response(204)


def _check_copy_id(copy_id: str) -> None:
    """A ``copyid`` that is not a GUID is refused before the blob is looked up: 400
    InvalidQueryParameterValue with the reason Azure gives (Java SDK recording
    BlobApiTests.abortCopyError, x-ms-version 2023-08-03, ``copyid=id`` on a missing blob)."""
    try:
        uuid.UUID(copy_id)
    except ValueError:
        raise invalid_parameter("copyid", copy_id, "copyid needs to be valid Guid.") from None
