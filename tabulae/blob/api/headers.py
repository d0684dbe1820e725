"""Request headers of the Blob service, read into the service's terms: conditions, ranges,
content properties, metadata, leases; and the response headers a blob carries."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tabulae.auth.shared_key import parse_rfc1123
from tabulae.blob import versioning
from tabulae.blob.api.formats import LeaseView, epoch_date, http_date
from tabulae.blob.rules.conditions import Conditions, etag_of
from tabulae.blob.rules.copies import without_signature
from tabulae.blob.rules.tags import parse_filter
from tabulae.blob.rules.tiers import TierView, header_pairs
from tabulae.blob.service import parse_snapshot
from tabulae.http.messages import Headers
from tabulae.http.metadata import metadata_headers
from tabulae.model.blobs import VERSION_PREFIX, BlobRecord, ContentProperties
from tabulae.model.errors import FrontEndRefusal, ServiceError

_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def bad_header(name: str, value: str) -> ServiceError:
    return ServiceError("InvalidHeaderValue", fields=(("HeaderName", name), ("HeaderValue", value)))


def _etags(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    tags = []
    for part in value.split(","):
        tag = part.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        tags.append(tag.strip('"'))
    return tuple(tags)


def http_seconds(value: str | None) -> int | None:
    """An RFC 1123 date header as epoch seconds; None when absent or unreadable."""
    return _date(value)


def _date(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(parse_rfc1123(value).timestamp())
    except ValueError:
        return None  # an unreadable date is no condition, as HTTP asks


def conditions(headers: dict[str, str], prefix: str = "") -> Conditions:
    """``If-*`` headers and ``x-ms-if-tags`` (``x-ms-source-if-*`` with ``prefix="x-ms-source-"``)."""
    tags_header = (prefix or "x-ms-") + "if-tags"
    if_tags = headers.get(tags_header)
    return Conditions(
        _etags(headers.get(prefix + "if-match")),
        _etags(headers.get(prefix + "if-none-match")),
        _date(headers.get(prefix + "if-modified-since")),
        _date(headers.get(prefix + "if-unmodified-since")),
        parse_filter(if_tags, header=tags_header) if if_tags is not None else None,
    )


def byte_range(headers: dict[str, str]) -> tuple[int, int | None] | None:
    """``x-ms-range`` (which wins) or ``Range``: (first byte, last byte or None). A malformed
    ``x-ms-range`` is refused; a malformed ``Range`` is ignored, as HTTP allows."""
    for name in ("x-ms-range", "range"):
        value = headers.get(name)
        if value is None:
            continue
        match = _RANGE.fullmatch(value.strip())
        if match is None:
            if name == "range":
                return None
            raise bad_header(name, value)
        start = int(match[1])
        end = int(match[2]) if match[2] else None
        if end is not None and end < start:
            raise bad_header(name, value)
        return start, end
    return None


def content_properties(
    headers: dict[str, str], *, default_type: str | None, with_plain: bool
) -> ContentProperties:
    """The ``x-ms-blob-*`` properties, left out ones cleared; with ``with_plain`` (Put Blob) the
    standard headers fill in for those left out; then the content type defaults to ``default_type``."""

    def pick(blob_name: str, plain: str | None) -> str | None:
        value = headers.get(blob_name)
        if value is None and with_plain and plain is not None:
            value = headers.get(plain)
        return value

    md5 = headers.get("x-ms-blob-content-md5")  # stored as given: Azure does not check its length
    return ContentProperties(
        content_type=pick("x-ms-blob-content-type", "content-type") or default_type,
        content_encoding=pick("x-ms-blob-content-encoding", "content-encoding"),
        content_language=pick("x-ms-blob-content-language", "content-language"),
        content_disposition=pick("x-ms-blob-content-disposition", None),
        cache_control=pick("x-ms-blob-cache-control", "cache-control"),
        content_md5=md5,
    )


@dataclass(frozen=True, slots=True)
class ContentOverrides:
    """Response header values a SAS may impose on a read (rscc, rscd, rsce, rscl, rsct)."""

    cache_control: str | None = None
    content_disposition: str | None = None
    content_encoding: str | None = None
    content_language: str | None = None
    content_type: str | None = None


def overrides_from(pairs: tuple[tuple[str, str], ...]) -> ContentOverrides:
    values = dict(pairs)
    return ContentOverrides(
        values.get("rscc"), values.get("rscd"), values.get("rsce"), values.get("rscl"), values.get("rsct")
    )


def blob_headers(
    record: BlobRecord,
    lease: LeaseView | None,
    overrides: ContentOverrides,
    *,
    whole: bool,
    properties: bool,
    tier: TierView | None = None,
) -> Headers:
    """What Get Blob and Get Blob Properties answer with. On a ranged read the blob's MD5 goes
    in ``x-ms-blob-content-md5`` (``Content-MD5`` would describe the range). ``tier`` is a block
    blob's (Get Blob Properties, and Get Blob from REST 2026-10-06 on)."""
    p = record.properties
    headers: Headers = [
        (b"last-modified", http_date(record.ticks).encode()),
        (b"etag", f'"{etag_of(record.ticks)}"'.encode()),
        (b"x-ms-creation-time", http_date(record.created).encode()),
        (b"x-ms-blob-type", record.blob_type.encode()),
        (b"accept-ranges", b"bytes"),
        (b"x-ms-server-encrypted", b"true"),
    ]
    content_type = overrides.content_type or p.content_type
    for name, value in (
        (b"content-type", content_type),
        (b"content-encoding", overrides.content_encoding or p.content_encoding),
        (b"content-language", overrides.content_language or p.content_language),
        (b"content-disposition", overrides.content_disposition or p.content_disposition),
        (b"cache-control", overrides.cache_control or p.cache_control),
    ):
        if value is not None:
            headers.append((name, value.encode("latin-1")))
    if p.content_md5:
        headers.append((b"content-md5" if whole else b"x-ms-blob-content-md5", p.content_md5.encode()))
    if lease is not None:
        status, state, duration = lease
        headers.append((b"x-ms-lease-status", status.encode()))
        headers.append((b"x-ms-lease-state", state.encode()))
        if duration:
            headers.append((b"x-ms-lease-duration", duration.encode()))
    if record.blob_type == "AppendBlob":
        headers.append((b"x-ms-blob-committed-block-count", str(record.block_count).encode()))
        if record.sealed:
            headers.append((b"x-ms-blob-sealed", b"true"))
    elif record.blob_type == "PageBlob":
        headers.append((b"x-ms-blob-sequence-number", str(record.sequence_number).encode()))
    if tier is not None:
        headers.extend((name.encode(), value.encode()) for name, value in header_pairs(tier, epoch_date))
    headers.extend(version_headers(record))
    copy = record.copy
    if copy is not None:
        headers.extend(
            [
                (b"x-ms-copy-id", copy.copy_id.encode()),
                (b"x-ms-copy-status", copy.status.encode()),
                (b"x-ms-copy-source", without_signature(copy.source).encode("latin-1", "replace")),
                (b"x-ms-copy-progress", copy.progress.encode()),
            ]
        )
        if copy.status != "pending":  # while pending, ``completed`` is the copy's heartbeat
            headers.append((b"x-ms-copy-completion-time", http_date(copy.completed).encode()))
        if copy.status_description:
            headers.append(
                (b"x-ms-copy-status-description", copy.status_description.encode("latin-1", "replace"))
            )
        if copy.incremental:
            headers.append((b"x-ms-incremental-copy", b"true"))
            if copy.destination_snapshot is not None:
                headers.append((b"x-ms-copy-destination-snapshot", copy.destination_snapshot.encode()))
    if record.tags:
        headers.append((b"x-ms-tag-count", str(len(record.tags)).encode()))
    headers.extend(metadata_headers(record.metadata))
    return headers


def version_headers(record: BlobRecord) -> Headers:
    """``x-ms-snapshot`` of a snapshot; ``x-ms-version-id`` of a version, and
    ``x-ms-is-current-version: true`` beside it for the current one (the base blob, when it has an
    id). A previous version's read names no ``x-ms-is-current-version`` at all, as Azure answers
    (recorded: the JS SDK's node/blob_versioning get_properties_of_a_blob_version and
    undelete_a_softdeleted_version, x-ms-version 2026-02-06: Get Blob Properties of a previous
    version, the header neither sent nor exposed; no recording shows it false)."""
    if record.snapshot.startswith(VERSION_PREFIX):
        return [(b"x-ms-version-id", record.snapshot[len(VERSION_PREFIX) :].encode())]
    if record.snapshot:
        return [(b"x-ms-snapshot", record.snapshot.encode())]
    if record.version_id:
        return [(b"x-ms-version-id", record.version_id.encode()), (b"x-ms-is-current-version", b"true")]
    return []


def etag_headers(ticks: int) -> Headers:
    return [(b"etag", f'"{etag_of(ticks)}"'.encode()), (b"last-modified", http_date(ticks).encode())]


def version_or_snapshot(query: dict[str, str]) -> str:
    """The snapshot or version (``versionid``) a request names, as the service names them."""
    version = query.get("versionid")
    if version is None:
        return parse_snapshot(query.get("snapshot"))
    if "snapshot" in query:  # Azure's recorded answer (a HEAD, so its message is not on record)
        raise ServiceError("MutuallyExclusiveQueryParameters")
    try:
        return versioning.key_of(version)
    except ServiceError as error:  # refused by the front-end, as a malformed snapshot is: a HEAD
        # gets a bare 400, neither x-ms-error-code nor x-ms-version (the Rust SDK's recorded
        # test_blob_version_error_cases, x-ms-version 2025-11-05)
        raise FrontEndRefusal(error.code, fields=error.fields) from None
