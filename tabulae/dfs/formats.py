"""The DFS API's bodies and headers, as real Azure writes and reads them.

JSON bodies are compact with their keys in alphabetical order and every number a string, as
recorded from Azure (JS SDK recordings of List Paths; python ``test_file_system.pyTestFileSystem
test_list_paths_recursively`` and ``test_directory.pyTestDirectorytest_set_access_control_recursive``):

- List Paths: ``{"paths":[{"contentLength":"0","creationTime":"133836942900949432",
  "etag":"0x8DD4A14B1E671B8","expiryTime":"0","group":"$superuser","isDirectory":"true",
  "lastModified":"Mon, 10 Feb 2025 20:51:30 GMT","name":"dir10","owner":"$superuser",
  "permissions":"rwxr-x---"}]}``; ``isDirectory`` only on directories, ``creationTime`` and
  ``expiryTime`` as Windows file times (100 ns ticks since 1601, ``"0"`` for no expiry), the
  ETag without quotes. ``Content-Type: application/json; charset=utf-8``.
- Set Access Control Recursive: ``{"directoriesSuccessful":6,"failedEntries":[],"failureCount":0,
  "filesSuccessful":25}`` with numbers as numbers, then a newline, and no ``Content-Type``.
- Errors: ``{"error":{"code":"PathAlreadyExists","message":"The specified path already
  exists.\\nRequestId:...\\nTime:2020-03-08T15:46:42.1944872Z"}}`` with ``x-ms-error-code``.

List File Systems' body (``{"filesystems":[{"etag","lastModified","name"}]}``) follows the same
conventions by assumption (no recording of it was found). ``x-ms-properties`` is
``name=base64(value)`` pairs joined by commas ("Path - Create"), which the SDK fills from its
``metadata`` argument (UTF-8, base64): names are metadata names, so ``InvalidPropertyName`` (the
REST reference's two messages) for an empty one or one that is no identifier; a value that is
not base64 of UTF-8 is 400 ``InvalidHeaderValue`` (assumed).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from xml.sax.saxutils import escape as xml_escape

import orjson

from tabulae.http.errors import error_text
from tabulae.model.blobs import ContentProperties
from tabulae.model.errors import ServiceError

JSON_CONTENT_TYPE = b"application/json; charset=utf-8"
CONTINUATION = b"x-ms-continuation"
RESOURCE_TYPE = b"x-ms-resource-type"
FILE, DIRECTORY = "file", "directory"
#: The namespace header a Set Access Control Recursive answer carries (recorded).
NAMESPACE_ENABLED = (b"x-ms-namespace-enabled", b"true")

_EPOCH_1601 = datetime(1601, 1, 1, tzinfo=UTC)


def filetime(moment: datetime | None) -> str:
    """A moment as a Windows file time string (100 ns ticks since 1601-01-01 UTC); ``"0"`` for
    none, as List Paths writes ``expiryTime`` of a path that never expires."""
    if moment is None:
        return "0"
    delta = moment - _EPOCH_1601
    return str((delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10)


def from_filetime(text: str) -> datetime | None:
    ticks = int(text)
    if ticks == 0:
        return None
    return _EPOCH_1601 + timedelta(microseconds=ticks // 10)


def http_date(moment: datetime) -> str:
    return format_datetime(moment.astimezone(UTC), usegmt=True)


def _dumps(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True, slots=True)
class PathItem:
    """One entry of a List Paths page."""

    name: str
    is_directory: bool
    content_length: int
    last_modified: datetime
    etag: str  # as in the ETag header, quotes and all; the body drops them
    owner: str
    group: str
    permissions: str
    creation_time: datetime
    expiry_time: datetime | None = None
    encryption_scope: str | None = None
    encryption_context: str | None = None


def _path_json(item: PathItem) -> dict[str, str]:
    entry = {
        "contentLength": str(item.content_length),
        "creationTime": filetime(item.creation_time),
        "etag": item.etag.strip('"'),
        "expiryTime": filetime(item.expiry_time),
        "group": item.group,
        "lastModified": http_date(item.last_modified),
        "name": item.name,
        "owner": item.owner,
        "permissions": item.permissions,
    }
    if item.is_directory:
        entry["isDirectory"] = "true"
    if item.encryption_scope is not None:
        entry["EncryptionScope"] = item.encryption_scope
    if item.encryption_context is not None:
        entry["EncryptionContext"] = item.encryption_context
    return entry


def list_paths(items: Iterable[PathItem]) -> bytes:
    """A List Paths page (its continuation, if any, goes in :data:`CONTINUATION`)."""
    return _dumps({"paths": [_path_json(item) for item in items]})


@dataclass(frozen=True, slots=True)
class FilesystemItem:
    name: str
    last_modified: datetime
    etag: str


def list_filesystems(items: Iterable[FilesystemItem]) -> bytes:
    """A List File Systems (``resource=account``) page."""
    return _dumps(
        {
            "filesystems": [
                {
                    "etag": item.etag.strip('"'),
                    "lastModified": http_date(item.last_modified),
                    "name": item.name,
                }
                for item in items
            ]
        }
    )


@dataclass(frozen=True, slots=True)
class AclFailure:
    name: str
    is_directory: bool
    message: str


def acl_recursive_result(
    directories: int, files: int, failure_count: int, failures: Sequence[AclFailure] = ()
) -> bytes:
    """A Set Access Control Recursive answer: counts of paths changed, and the failed entries
    (``failureCount`` counts them all, ``failedEntries`` lists what it can)."""
    return (
        _dumps(
            {
                "directoriesSuccessful": directories,
                "failedEntries": [
                    {
                        "errorMessage": failure.message,
                        "name": failure.name,
                        "type": "DIRECTORY" if failure.is_directory else "FILE",
                    }
                    for failure in failures
                ],
                "failureCount": failure_count,
                "filesSuccessful": files,
            }
        )
        + b"\n"
    )


#: Where the DFS endpoint words a shared error its own way ("resource" for the Blob API's "blob"),
#: as Azure's recorded DFS answers do (Append, Flush, Delete and Create Path on a leased file).
_DFS_WORDING = {
    "There is currently a lease on the blob and no lease ID was specified in the request.": (
        "There is currently a lease on the resource and no lease ID was specified in the request."
    ),
}


#: Where the DFS endpoint answers a shared error under a code of its own: a lease id given for a
#: path without a lease is 412 LeaseNotPresent, "There is currently no lease on the resource.", as
#: the .NET SDK's recordings of Append Data (FileClientTests/AppendDataAsync_InvalidLease) and Delete
#: Path (DirectoryClientTests/DeleteAsync_ConditionsFail) show; the Blob API says
#: LeaseNotPresentWithBlobOperation. A lease id other than the path's is 412 LeaseIdMismatch, "The
#: lease ID specified did not match the lease ID for the resource." (the Java SDK's recording of
#: Append Data, FileApiTest.appendDataLeaseFail, x-ms-version 2023-01-03), the Blob API's
#: LeaseIdMismatchWithBlobOperation.
_DFS_CODES = {
    "LeaseNotPresentWithBlobOperation": "LeaseNotPresent",
    "LeaseIdMismatchWithBlobOperation": "LeaseIdMismatch",
}


def dfs_error(error: ServiceError) -> ServiceError:
    """``error`` as the DFS endpoint names it (itself when the endpoint shares the Blob code)."""
    code = _DFS_CODES.get(error.code)
    if code is None:
        return error
    return ServiceError(code, index=error.index, headers=error.headers)


def error_body(error: ServiceError, request_id: str, time_text: str) -> bytes:
    """The DFS error body; the message ends with the RequestId and Time lines as for the other
    services. The header an InvalidHeaderValue names follows as ``detail``, as in Azure's answer
    to the .NET SDK's AppendDataAsync_EmptyStream (``{"HeaderName": "Content-Length",
    "HeaderValue": "0"}``), and so does the one a MissingRequiredHeader names (the Java SDK's
    FileApiTest.createOptionsWithLeaseIdError: ``{"HeaderName": "x-ms-lease-duration"}``), and an
    AuthenticationFailed's detail as ``{"AuthenticationErrorDetail": ...}`` (the Java SDK's
    SasTests.fileSystemUserDelegationCorrelationIdError: "Signature fields not well formed.");
    other errors' extra fields are not written (none recorded)."""
    text = error_text(error, request_id, time_text)
    worded = _DFS_WORDING.get(error.message)
    if worded is not None:
        text = worded + text[len(error.message) :] if error.index is None else text
    body: dict[str, object] = {"code": error.code, "message": text}
    if error.code in ("InvalidHeaderValue", "MissingRequiredHeader") and error.fields:
        body["detail"] = dict(error.fields)
    elif error.code == "AuthenticationFailed" and error.detail:
        body["detail"] = {"AuthenticationErrorDetail": error.detail}
    return orjson.dumps({"error": body})


# --- headers -------------------------------------------------------------------------------------

_PROPERTY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_properties(text: str) -> dict[str, str]:
    """``x-ms-properties``: ``n1=base64,n2=base64`` (spaces after the commas allowed, as the
    reference's own example has them). The first ``=`` ends a name, base64 padding follows."""
    properties: dict[str, str] = {}
    if not text.strip():
        return properties
    seen: set[str] = set()
    for piece in text.split(","):
        name, sep, encoded = piece.strip().partition("=")
        if not name or not sep:
            raise ServiceError("InvalidPropertyName", "A property name cannot be empty.")
        if not _PROPERTY_NAME.fullmatch(name) or name.lower() in seen:
            raise ServiceError("InvalidPropertyName")
        seen.add(name.lower())
        try:
            value = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise ServiceError(
                "InvalidHeaderValue", fields=(("HeaderName", "x-ms-properties"), ("HeaderValue", text))
            ) from exc
        properties[name] = value
    return properties


def render_properties(properties: Mapping[str, str]) -> str:
    """``x-ms-properties`` of a response: the pairs in their order, no spaces."""
    return ",".join(
        f"{name}={base64.b64encode(value.encode()).decode()}" for name, value in properties.items()
    )


def access_control_headers(
    owner: str, group: str, permissions: str, acl_text: str | None = None
) -> list[tuple[bytes, bytes]]:
    """``x-ms-owner``, ``x-ms-group``, ``x-ms-permissions`` and (Get Access Control only)
    ``x-ms-acl``, as Get Properties and Get Access Control answer them (recorded)."""
    headers = [
        (b"x-ms-owner", owner.encode()),
        (b"x-ms-group", group.encode()),
        (b"x-ms-permissions", permissions.encode()),
    ]
    if acl_text is not None:
        headers.append((b"x-ms-acl", acl_text.encode()))
    return headers


def resource_type_header(is_directory: bool) -> tuple[bytes, bytes]:
    return (RESOURCE_TYPE, (DIRECTORY if is_directory else FILE).encode())


# --- continuation tokens ---------------------------------------------------------------------


def encode_continuation(marker: str) -> str:
    """An opaque token for where a listing (or a recursive delete or ACL change) resumes: the
    next path name, URL-safe base64 without padding, so it needs no escaping in a header or a
    query string."""
    return base64.urlsafe_b64encode(marker.encode()).decode().rstrip("=")


def decode_continuation(token: str, name: str = "continuation") -> str:
    """The marker of a token from :func:`encode_continuation`; anything else is 400
    ``InvalidQueryParameterValue`` (assumed: Azure's tokens are opaque too)."""
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ServiceError(
            "InvalidQueryParameterValue",
            fields=(("QueryParameterName", name), ("QueryParameterValue", token)),
        ) from exc


# --- expiry ----------------------------------------------------------------------------------

EXPIRY_OPTIONS = ("NeverExpire", "RelativeToCreation", "RelativeToNow", "Absolute")


def expiry(option: str, value: str | None, *, now: datetime, created: datetime) -> datetime | None:
    """When a file expires, from ``x-ms-expiry-option`` and ``x-ms-expiry-time`` (Create Path,
    Set Expiry): never; milliseconds after creation or now; or an HTTP date. The SDK sends
    ``RelativeToNow`` with milliseconds (captured). Bad values are 400 ``InvalidHeaderValue``
    (assumed)."""

    def bad(name: str, text: str) -> ServiceError:
        return ServiceError("InvalidHeaderValue", fields=(("HeaderName", name), ("HeaderValue", text)))

    if option not in EXPIRY_OPTIONS:
        raise bad("x-ms-expiry-option", option)
    if option == "NeverExpire":
        if value is not None:
            raise bad("x-ms-expiry-time", value)
        return None
    if value is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-expiry-time"),))
    if option == "Absolute":
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError) as exc:
            raise bad("x-ms-expiry-time", value) from exc
        if moment.tzinfo is None:
            raise bad("x-ms-expiry-time", value)
        return moment.astimezone(UTC)
    if not value.isascii() or not value.isdigit():
        raise bad("x-ms-expiry-time", value)
    base = created if option == "RelativeToCreation" else now
    try:
        return base + timedelta(milliseconds=int(value))
    except OverflowError as exc:
        raise bad("x-ms-expiry-time", value) from exc


# --- List Deleted Paths (the Blob API's List Blobs form) ----------------------------------------


@dataclass(frozen=True, slots=True)
class DeletedItem:
    """One soft-deleted path of List Deleted Paths."""

    name: str
    deletion_id: str
    is_directory: bool
    content_length: int
    created: datetime
    last_modified: datetime
    etag: str
    deleted: datetime
    remaining_days: int
    purge: datetime  # when its retention ends: the listing's ``Expiry-Time``
    properties: ContentProperties = field(default_factory=ContentProperties)


#: The CRC64 Azure lists for a soft-deleted path of no content (recorded for empty files and
#: directories); for one with content the element stays empty, as in the Blob API's listings.
EMPTY_CRC64 = "AAAAAAAAAAA="


def _deleted_properties(item: DeletedItem) -> str:
    """A soft-deleted path's ``<Properties>`` in the order Azure lists them."""
    p = item.properties

    def element(tag: str, value: str | None) -> str:
        return f"<{tag}>{xml_escape(value)}</{tag}>" if value else f"<{tag} />"

    crc64 = EMPTY_CRC64 if item.content_length == 0 else None
    return (
        f"<Properties><Creation-Time>{http_date(item.created)}</Creation-Time>"
        f"<Last-Modified>{http_date(item.last_modified)}</Last-Modified>"
        f"<Expiry-Time>{http_date(item.purge)}</Expiry-Time><Etag>{item.etag}</Etag>"
        f"<ResourceType>{DIRECTORY if item.is_directory else FILE}</ResourceType>"
        f"<Content-Length>{item.content_length}</Content-Length>"
        f"{element('Content-Type', p.content_type or 'application/octet-stream')}"
        f"{element('Content-Encoding', p.content_encoding)}{element('Content-Language', p.content_language)}"
        f"{element('Content-CRC64', crc64)}{element('Content-MD5', p.content_md5)}"
        f"{element('Cache-Control', p.cache_control)}{element('Content-Disposition', p.content_disposition)}"
        "<BlobType>BlockBlob</BlobType><AccessTier>Hot</AccessTier>"
        "<AccessTierInferred>true</AccessTierInferred><ServerEncrypted>true</ServerEncrypted>"
        f"<DeletedTime>{http_date(item.deleted)}</DeletedTime>"
        f"<RemainingRetentionDays>{item.remaining_days}</RemainingRetentionDays></Properties>"
    )


def list_deleted_paths(
    endpoint: str,
    filesystem: str,
    items: Iterable[DeletedItem],
    *,
    prefix: str = "",
    marker: str = "",
    max_results: str = "",
    next_marker: str | None = None,
) -> bytes:
    """List Deleted Paths' body (``restype=container&comp=list&showonly=deleted``): the Blob
    API's ``EnumerationResults`` with ``<DeletionId>`` and the path's ``<ResourceType>``, in the
    order and with the elements recorded from Azure (python ``test_file_system.pyTestFileSystem
    test_get_deleted_paths``; the .NET SDK's FileSystemClientTests/GetDeletedPathsAsync and the JS
    SDK's listDeletedPaths, x-ms-version 2020-06-12 to 2023-08-03: ``Expiry-Time`` when the
    retention ends, the empty content elements, the CRC64 of nothing for an empty path, the
    inferred Hot tier). Before 2023-08-03 Azure left ``<ResourceType>`` out; it is always written
    here, as in this server's other listings of HNS accounts. The SDK reads the name, id,
    deletion time and remaining days."""

    def optional(tag: str, value: str) -> str:
        return f"<{tag}>{xml_escape(value)}</{tag}>" if value else ""

    parts = [
        '\ufeff<?xml version="1.0" encoding="utf-8"?>',
        f'<EnumerationResults ServiceEndpoint="{xml_escape(endpoint)}/"'
        f' ContainerName="{xml_escape(filesystem)}">',
        optional("Prefix", prefix),
        optional("Marker", marker),
        optional("MaxResults", max_results),
        "<Blobs>",
    ]
    for item in items:
        parts.append(
            f"<Blob><Name>{xml_escape(item.name)}</Name><DeletionId>{item.deletion_id}</DeletionId>"
            f"<Deleted>true</Deleted>{_deleted_properties(item)}<OrMetadata /></Blob>"
        )
    parts.append("</Blobs>")
    parts.append(f"<NextMarker>{xml_escape(next_marker)}</NextMarker>" if next_marker else "<NextMarker />")
    parts.append("</EnumerationResults>")
    return "".join(parts).encode()
