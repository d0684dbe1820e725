"""The Blob service's XML: container and blob listings, block lists, and the Blob parts of the
service properties, in the element order of Azure's own responses ("List Containers", "List
Blobs", "Get Block List", "Get Blob Service Properties"). Parsing never depends on order."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from email.utils import formatdate
from urllib.parse import quote
from xml.sax.saxutils import escape

from tabulae.blob.api.tag_formats import tag_set
from tabulae.blob.rules import container_worm
from tabulae.blob.rules.blocks import KINDS
from tabulae.blob.rules.conditions import etag_of
from tabulae.blob.rules.copies import without_signature
from tabulae.blob.rules.names import XML_UNSAFE
from tabulae.blob.rules.properties import BlobServiceProperties, DeleteRetention, StaticWebsite
from tabulae.blob.rules.tiers import TierView, listing_pairs
from tabulae.http.documents import (
    RETENTION_RANGE,
    bool_text,
    parse_document,
    properties_root,
    render_service_properties,
    service_properties_of,
    text_of,
    xml_bool,
)
from tabulae.http.xmlplace import document_error
from tabulae.model import edm
from tabulae.model.blobs import VERSION_PREFIX, BlobRecord, ContainerRecord, Extent
from tabulae.model.errors import ServiceError

DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'
_FIXED_CONTAINER_PROPERTIES = (
    "<DefaultEncryptionScope>$account-encryption-key</DefaultEncryptionScope>"
    "<DenyEncryptionScopeOverride>false</DenyEncryptionScopeOverride>"
)


def _scope_properties(record: ContainerRecord) -> str:
    """A container's ``DefaultEncryptionScope`` and ``DenyEncryptionScopeOverride``."""
    if record.default_scope is None and not record.deny_scope_override:
        return _FIXED_CONTAINER_PROPERTIES
    deny = "true" if record.deny_scope_override else "false"
    scope = escape(record.default_scope or "$account-encryption-key")
    return (
        f"<DefaultEncryptionScope>{scope}</DefaultEncryptionScope>"
        f"<DenyEncryptionScopeOverride>{deny}</DenyEncryptionScopeOverride>"
    )


LeaseView = tuple[str, str, str | None]  # (status, state, duration)


def _worm_properties(record: ContainerRecord) -> str:
    """A container's ``HasImmutabilityPolicy`` and ``HasLegalHold`` (container-level WORM)."""
    policy = "true" if container_worm.has_policy(record.worm) else "false"
    hold = "true" if container_worm.has_hold(record.worm) else "false"
    return (
        f"<HasImmutabilityPolicy>{policy}</HasImmutabilityPolicy><HasLegalHold>{hold}</HasLegalHold>"
        "<ImmutableStorageWithVersioningEnabled>false</ImmutableStorageWithVersioningEnabled>"
    )


def http_date(ticks: int) -> str:
    """RFC 1123, one-second resolution: Last-Modified and friends."""
    return _date_of_second((ticks - edm.UNIX_EPOCH_TICKS) // edm.TICKS_PER_SECOND)


@functools.lru_cache(maxsize=4096)
def _date_of_second(second: int) -> str:
    return formatdate(second, usegmt=True)  # formatted once per second seen: it is not cheap


def _element(tag: str, value: str | None) -> str:
    return f"<{tag}>{escape(value)}</{tag}>" if value else f"<{tag} />"


def _metadata(metadata: dict[str, str]) -> str:
    if not metadata:
        return "<Metadata />"
    return "<Metadata>" + "".join(f"<{k}>{escape(v)}</{k}>" for k, v in metadata.items()) + "</Metadata>"


_AVAILABLE = "<LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState>"


SOFT_DELETED_LEASE: LeaseView = ("", "", None)
"""The lease of a soft-deleted base blob in a listing: Azure writes an empty ``<LeaseStatus />``
and no state (the JS SDK's nock recordings of List Blobs include=deleted on a flat account, from
x-ms-version 2018-03-28 to 2019-12-12, June 2019 to June 2020)."""


def _lease(view: LeaseView) -> str:
    if view is SOFT_DELETED_LEASE:
        return "<LeaseStatus />"
    status, state, duration = view
    if state == "available":
        return _AVAILABLE
    text = f"<LeaseStatus>{status}</LeaseStatus><LeaseState>{state}</LeaseState>"
    return text + (f"<LeaseDuration>{duration}</LeaseDuration>" if duration else "")


def _optional(tag: str, value: str) -> str:
    return f"<{tag}>{escape(value)}</{tag}>" if value else ""


# A soft-deleted container is listed as leased, for good, with the ETag, encryption scope and
# immutability elements of a live one before its DeletedTime, as Azure answered the .NET SDK
# (ServiceClientTests/ListContainersSegmentAsync_Deleted.json, x-ms-version 2024-08-04).
_DELETED_LEASE = (
    "<LeaseStatus>locked</LeaseStatus><LeaseState>leased</LeaseState><LeaseDuration>fixed</LeaseDuration>"
)


def render_containers(
    base: str,
    prefix: str,
    marker: str,
    max_results: str,
    containers: Sequence[tuple[ContainerRecord, LeaseView]],
    include_metadata: bool,
    next_marker: str | None,
    deleted: Sequence[tuple[str, str, float, int, ContainerRecord]] = (),
) -> bytes:
    """``deleted``: soft-deleted containers (name, version, deletion time, remaining days, the
    record kept aside; its metadata shown with ``include=metadata``, as for the live ones)."""
    parts = [
        DECLARATION,
        f'<EnumerationResults ServiceEndpoint="{escape(base)}/">',
        _optional("Prefix", prefix),
        _optional("Marker", marker),
        _optional("MaxResults", max_results),
        "<Containers>",
    ]
    for record, lease in containers:
        public = f"<PublicAccess>{record.public_access}</PublicAccess>" if record.public_access else ""
        parts.append(
            f"<Container><Name>{escape(record.name)}</Name><Properties>"
            f'<Last-Modified>{http_date(record.ticks)}</Last-Modified><Etag>"{etag_of(record.ticks)}"</Etag>'
            f"{_lease(lease)}{public}{_scope_properties(record)}{_worm_properties(record)}</Properties>"
            + (_metadata(record.metadata) if include_metadata else "")
            + "</Container>"
        )
    for name, version, when, left, kept in deleted:
        parts.append(
            f"<Container><Name>{escape(name)}</Name><Deleted>true</Deleted><Version>{version}</Version>"
            f'<Properties><Last-Modified>{epoch_date(when)}</Last-Modified><Etag>"{etag_of(kept.ticks)}"</Etag>'
            f"{_DELETED_LEASE}{_scope_properties(kept)}{_worm_properties(kept)}<DeletedTime>{epoch_date(when)}"
            f"</DeletedTime><RemainingRetentionDays>{left}</RemainingRetentionDays></Properties>"
            + (_metadata(kept.metadata) if include_metadata else "")
            + "</Container>"
        )
    parts.append("</Containers>")
    parts.append(_element("NextMarker", next_marker))
    parts.append("</EnumerationResults>")
    return "".join(parts).encode()


def _text(value: str) -> str:
    """XML-escaped text; most values need none, and checking is cheaper than escaping."""
    return escape(value) if ("&" in value or "<" in value or ">" in value) else value


def _field(tag: str, value: str | None) -> str:
    return f"<{tag}>{_text(value)}</{tag}>" if value else f"<{tag} />"


_TIER = "<AccessTier>Hot</AccessTier><AccessTierInferred>true</AccessTierInferred>"
_SEALED = "<Sealed>true</Sealed>"


def epoch_date(seconds: float) -> str:
    """RFC 1123 of an epoch time in seconds (tier change times)."""
    return _date_of_second(int(seconds))


def tier_elements(view: TierView | None) -> str:
    """A blob's tier elements of ``<Properties>`` (none for blob types without a tier)."""
    if view is None:
        return ""
    if view.inferred and view.changed_at is None:
        return _inferred(view.access_tier)  # most blobs: the account default, as one string
    return "".join(f"<{tag}>{value}</{tag}>" for tag, value in listing_pairs(view, epoch_date))


@functools.lru_cache(maxsize=8)
def _inferred(tier: str) -> str:
    return f"<AccessTier>{tier}</AccessTier><AccessTierInferred>true</AccessTierInferred>"


def _blob_properties(
    record: BlobRecord,
    lease: LeaseView | None,
    include_copy: bool,
    tier: str,
    extra: str = "",
    kind: str = "",
    accessed: str = "",
    crc64: str = "<Content-CRC64 />",
) -> str:
    """One blob's ``<Properties>``: built as one string, as a listing builds 5,000 of them.
    ``kind``: the ``<ResourceType>`` element of a path of an HNS account (else empty).
    ``accessed`` (``<LastAccessTime>``) goes before ``<BlobType>`` and ``extra`` (the
    immutability policy and legal hold) after ``<ServerEncrypted>``, as Azure wrote them for the
    .NET SDK (ImmutableStorageWithVersioningTests/SetImmutibilityPolicyAsync.json, x-ms-version
    2026-06-06: ``<Content-Disposition /><LastAccessTime>..</LastAccessTime><BlobType>`` and
    ``<ServerEncrypted>true</ServerEncrypted><ImmutabilityPolicyUntilDate>``). A page blob's
    sequence number beside ``<LastAccessTime>``, and the encryption and tag elements beside
    the immutability ones, are not recorded together (their order here is assumed)."""
    if not record.committed and record.deleted_time is None:  # a blob of staged blocks only
        return (
            f"<Properties><Content-Length>{record.size}</Content-Length>"
            f"<BlobType>{record.blob_type}</BlobType><ServerEncrypted>true</ServerEncrypted></Properties>"
        )
    p = record.properties
    copy = record.copy
    copied = ""
    if include_copy and copy is not None:  # CopySource before CopyStatus, as Azure writes them
        # (the Go SDK's recording TestContainerListBlobsIncludeMultipleImpl, 2023-11-03; the JS
        # SDK's incremental copy listings at 2018-11-09 agree), not in the reference's order
        copied = (
            f"<CopyId>{copy.copy_id}</CopyId><CopySource>{escape(without_signature(copy.source))}</CopySource>"
            f"<CopyStatus>{copy.status}</CopyStatus><CopyProgress>{copy.progress}</CopyProgress>"
        )
        if copy.status != "pending":  # while pending, ``completed`` is the copy's heartbeat
            copied += f"<CopyCompletionTime>{http_date(copy.completed)}</CopyCompletionTime>"
        if copy.status_description:
            copied += f"<CopyStatusDescription>{escape(copy.status_description)}</CopyStatusDescription>"
        if copy.incremental:
            copied += "<IncrementalCopy>true</IncrementalCopy>" + _optional(
                "CopyDestinationSnapshot", copy.destination_snapshot or ""
            )
    return (
        f"<Properties><Creation-Time>{http_date(record.created)}</Creation-Time>"
        f"<Last-Modified>{http_date(record.ticks)}</Last-Modified><Etag>0x{record.ticks:X}</Etag>{kind}"
        f"<Content-Length>{record.size}</Content-Length>{_field('Content-Type', p.content_type)}"
        f"{_field('Content-Encoding', p.content_encoding) if p.content_encoding else '<Content-Encoding />'}"
        f"{_field('Content-Language', p.content_language) if p.content_language else '<Content-Language />'}"
        f"{crc64}{_field('Content-MD5', p.content_md5)}"
        f"{_field('Cache-Control', p.cache_control) if p.cache_control else '<Cache-Control />'}"
        f"{_field('Content-Disposition', p.content_disposition)}"
        f"{_sequence(record)}{accessed}<BlobType>{record.blob_type}</BlobType>{tier}"
        f"{_lease(lease) if lease is not None else ''}{copied}{_SEALED if record.sealed else ''}"
        f"<ServerEncrypted>true</ServerEncrypted>{_encryption(record)}{_tag_count(record)}{extra}</Properties>"
    )


def _encryption(record: BlobRecord) -> str:
    """A blob's customer-provided key digest and encryption scope, when it has them."""
    if record.encryption_key_sha256 is None and record.encryption_scope is None:
        return ""
    return _optional("CustomerProvidedKeySha256", record.encryption_key_sha256 or "") + _optional(
        "EncryptionScope", record.encryption_scope or ""
    )


def _sequence(record: BlobRecord) -> str:
    """A page blob's sequence number element (other blobs have none)."""
    if record.blob_type != "PageBlob":
        return ""
    return f"<x-ms-blob-sequence-number>{record.sequence_number}</x-ms-blob-sequence-number>"


def _tag_count(record: BlobRecord) -> str:
    return f"<TagCount>{len(record.tags)}</TagCount>" if record.tags else ""


_DIRECTORY_KIND = "<ResourceType>directory</ResourceType>"
_FILE_KIND = "<ResourceType>file</ResourceType>"


def render_blobs(
    base: str,
    container: str,
    query: dict[str, str],
    items: Sequence[tuple[BlobRecord, LeaseView | None] | str],
    include: frozenset[str],
    next_marker: str | None,
    tier_of: Callable[[BlobRecord], str] | None = None,
    remaining_days: Callable[[BlobRecord], int] | None = None,
    extra_of: Callable[[BlobRecord], str] | None = None,
    accessed_of: Callable[[BlobRecord], str] | None = None,
    versions_only: Collection[int] = (),
    directory_of: Callable[[BlobRecord], bool] | None = None,
    crc64: bool = True,
) -> bytes:
    """``crc64``: the listing's version writes ``<Content-CRC64 />`` (from 2019-02-02,
    ``rules.checksums.CRC64_VERSION``). ``tier_of`` gives a blob's tier elements
    (:func:`tier_elements`); without it every block blob shows the default tier, inferred.
    ``versions_only``: the indexes of items that are the roots of blobs with versions only
    (``include=deletedwithversions``). ``directory_of``, given for an account with a hierarchical
    namespace, tells a directory from a file: there every blob's properties say which it is
    (``<ResourceType>`` after ``<Etag>``, as Azure's listings of such accounts recorded for the
    JavaScript SDK's tests show)."""
    parts = [
        DECLARATION,
        f'<EnumerationResults ServiceEndpoint="{escape(base)}/" ContainerName="{escape(container)}">',
        _prefix(query.get("prefix", "")),
        _optional("Marker", query.get("marker", "")),
        _optional("MaxResults", query.get("maxresults", "")),
        _optional("Delimiter", query.get("delimiter", "")),
        "<Blobs>",
    ]
    crc_element = "<Content-CRC64 />" if crc64 else ""
    for index, item in enumerate(items):
        if isinstance(item, str):
            parts.append(f"<BlobPrefix>{_name(item)}</BlobPrefix>")
            continue
        record, lease = item
        parts.append(f"<Blob>{_name(record.name)}")
        parts.append(_version_elements(record))
        if index in versions_only:
            parts.append("<HasVersionsOnly>true</HasVersionsOnly>")
        tier = tier_of(record) if tier_of is not None else _TIER if record.blob_type == "BlockBlob" else ""
        extra = extra_of(record) if extra_of is not None and record.committed else ""
        accessed = accessed_of(record) if accessed_of is not None and record.committed else ""
        kind = ""
        if directory_of is not None:
            kind = _DIRECTORY_KIND if directory_of(record) else _FILE_KIND
        properties = _blob_properties(
            record, lease, "copy" in include, tier, extra, kind, accessed, crc_element
        )
        if record.deleted_time is not None:  # soft-deleted
            left = remaining_days(record) if remaining_days is not None else record.retention_days
            parts.append("<Deleted>true</Deleted>")
            properties = (
                f"{properties[: -len('</Properties>')]}<DeletedTime>{epoch_date(record.deleted_time)}"
                f"</DeletedTime><RemainingRetentionDays>{left}</RemainingRetentionDays></Properties>"
            )
        parts.append(properties)
        if "metadata" in include and record.committed:
            parts.append(_metadata(record.metadata))
        if "tags" in include and record.tags:
            parts.append(f"<Tags>{tag_set(record.tags)}</Tags>")
        parts.append("<OrMetadata /></Blob>")
    parts.append("</Blobs>")
    parts.append(_element("NextMarker", next_marker))
    parts.append("</EnumerationResults>")
    return "".join(parts).encode()


def _version_elements(record: BlobRecord) -> str:
    """``<Snapshot>`` of a snapshot, ``<VersionId>`` of a version (a previous one is stored under
    ``v`` and its id), and ``<IsCurrentVersion>`` of the base blob whenever it has a version id,
    whatever the listing includes (recorded: the Go SDK's TestContainerListBlobsSpecificValidPrefix
    lists with no include, TestAppendBlockPermanentDeleteWithoutPermission with
    include=snapshots, both x-ms-version 2023-11-03 on a versioned account)."""
    snapshot = record.snapshot
    if snapshot.startswith(VERSION_PREFIX):
        return f"<VersionId>{snapshot[len(VERSION_PREFIX) :]}</VersionId>"
    if snapshot.startswith("~"):  # a soft-deleted base blob, kept aside
        return ""
    if snapshot:
        return f"<Snapshot>{snapshot}</Snapshot>"
    if record.version_id:
        return f"<VersionId>{record.version_id}</VersionId><IsCurrentVersion>true</IsCurrentVersion>"
    return ""


def _name(name: str) -> str:
    """A blob name, percent-encoded (``Encoded="true"``) when XML cannot carry it as it is."""
    if XML_UNSAFE.search(name):
        return f'<Name Encoded="true">{quote(name, safe="")}</Name>'
    return f"<Name>{_text(name)}</Name>"


def _prefix(prefix: str) -> str:
    """List Blobs' ``<Prefix>``, percent-encoded as a name is when XML cannot carry it: Azure
    answered ``prefix=prefix%EF%BF%BF`` with ``<Prefix Encoded="true">prefix%EF%BF%BF</Prefix>``
    (the C++ SDK's DataLakeFileSystemClientTest.ListDeletedPathsEncoded, x-ms-version
    2022-11-02)."""
    if XML_UNSAFE.search(prefix):
        return f'<Prefix Encoded="true">{quote(prefix, safe="")}</Prefix>'
    return _optional("Prefix", prefix)


def _blocks(tag: str, extents: Sequence[Extent]) -> str:
    if not extents:
        return f"<{tag} />"
    inner = "".join(
        f"<Block><Name>{escape(e.block_id or '')}</Name><Size>{e.length}</Size></Block>" for e in extents
    )
    return f"<{tag}>{inner}</{tag}>"


def render_block_list(committed: Sequence[Extent] | None, uncommitted: Sequence[Extent] | None) -> bytes:
    parts = [DECLARATION, "<BlockList>"]
    if committed is not None:
        parts.append(_blocks("CommittedBlocks", [e for e in committed if e.block_id is not None]))
    if uncommitted is not None:
        parts.append(_blocks("UncommittedBlocks", uncommitted))
    parts.append("</BlockList>")
    return "".join(parts).encode()


def parse_block_list(body: bytes) -> list[tuple[str, str]]:
    """``<BlockList><Latest>id</Latest>…</BlockList>`` → [(kind, id)] in document order."""
    root = parse_document(body, "BlockList")
    if root is None:
        raise ServiceError("InvalidXmlDocument")
    entries: list[tuple[str, str]] = []
    for element in root:
        if element.tag not in KINDS:
            raise ServiceError("InvalidXmlNodeValue")
        entries.append((element.tag, (element.text or "").strip()))
    return entries


# ------------------------------------------------------------------------ service properties


def parse_service_properties_blob(body: bytes, current: BlobServiceProperties) -> BlobServiceProperties:
    """The shared elements as every service parses them, then the Blob ones; elements left out
    keep their current values."""
    root = properties_root(body)
    common = service_properties_of(root, current.common, body)
    result = BlobServiceProperties(
        common, current.delete_retention, current.static_website, current.default_service_version
    )
    element = root.find("DeleteRetentionPolicy")
    if element is not None:
        if element.find("Enabled") is None:  # ...RetentionPolicyEmpty.json: line 2, position 52
            raise document_error(body, _DELETE_RETENTION, "Element is missing: Enabled.", after=False)
        enabled = xml_bool(text_of(element, "Enabled"))
        days = text_of(element, "Days")
        if enabled:
            _check_retention_days(body, days)
        allow = text_of(element, "AllowPermanentDelete")
        result.delete_retention = DeleteRetention(
            enabled, int(days) if enabled and days else None, xml_bool(allow) if allow is not None else False
        )
    element = root.find("StaticWebsite")
    if element is not None:
        result.static_website = StaticWebsite(
            xml_bool(text_of(element, "Enabled")),
            text_of(element, "IndexDocument") or None,
            text_of(element, "ErrorDocument404Path") or None,
            text_of(element, "DefaultIndexDocumentPath") or None,
        )
    version = text_of(root, "DefaultServiceVersion")
    if version:
        result.default_service_version = version
    return result


_DELETE_RETENTION = ("StorageServiceProperties", "DeleteRetentionPolicy")


def _check_retention_days(body: bytes, days: str | None) -> None:
    """An enabled ``DeleteRetentionPolicy`` needs ``Days`` from 1 to 365. Azure refuses one
    without it, or out of range, as a document error naming where its reader stood: at the
    policy's end tag, or at the tag after ``</Days>`` (Go SDK recordings go/sdk/storage/
    azdatalake/testdata/recordings/Test/TestAccountDeleteRetentionPolicyDaysOmitted.json and
    ...DaysTooLarge.json, x-ms-version 2023-11-03: "Element is missing: Days." and 366; the azblob
    recording TestAccountDeleteRetentionPolicyDaysTooSmall, 0, at the same place); a value that is
    no number at all stays InvalidXmlNodeValue (not recorded)."""
    if days is None:
        raise document_error(body, _DELETE_RETENTION, "Element is missing: Days.", after=False)
    if not days.isdigit():
        raise ServiceError("InvalidXmlNodeValue")
    if not 1 <= int(days[:4]) <= 365:
        raise document_error(body, (*_DELETE_RETENTION, "Days"), RETENTION_RANGE, after=True)


def render_service_properties_blob(
    properties: BlobServiceProperties, *, permanent_delete: bool = True
) -> bytes:
    """The document; ``permanent_delete`` is whether the request's x-ms-version is one that is
    answered ``AllowPermanentDelete`` (rules/properties.PERMANENT_DELETE_VERSION)."""
    retention = properties.delete_retention
    days = f"<Days>{retention.days}</Days>" if retention.enabled and retention.days else ""
    allow = bool_text(retention.allow_permanent_delete)
    website = properties.static_website
    extra = (
        f"<DeleteRetentionPolicy><Enabled>{bool_text(retention.enabled)}</Enabled>{days}"
        + (f"<AllowPermanentDelete>{allow}</AllowPermanentDelete>" if permanent_delete else "")
        + f"</DeleteRetentionPolicy><StaticWebsite><Enabled>{bool_text(website.enabled)}</Enabled>"
        + _optional("IndexDocument", website.index_document or "")
        + _optional("ErrorDocument404Path", website.error_document_404_path or "")
        + _optional("DefaultIndexDocumentPath", website.default_index_document_path or "")
        + "</StaticWebsite>"
        + _optional("DefaultServiceVersion", properties.default_service_version or "")
    )
    return render_service_properties(properties.common, extra)
