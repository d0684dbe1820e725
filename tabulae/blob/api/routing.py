"""From a request's host and raw path to the account, container and blob it addresses, and the
names of the operations a request to them may be (which one is :mod:`.operations`' decision).

``/{container}`` with ``restype=container`` (or ``restype=account``) names a container; any
other one-segment path names a blob of the root container ``$root``; a longer path names the
blob that is the rest of the path, slashes and a final slash included ("Naming and Referencing
Containers, Blobs, and Metadata"); a backslash counts as a slash, as on Azure. Each segment is
percent-decoded once, as UTF-8.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tabulae.http.addressing import decode_segments, is_path_style, locate_account

if TYPE_CHECKING:
    from tabulae.admission.blobs import BlobTicket

ROOT_CONTAINER = "$root"


class Kind(enum.Enum):
    SERVICE = "service"
    CONTAINER = "container"
    BLOB = "blob"


class Operation(enum.StrEnum):
    """Every Blob operation Tabulae serves, named as the REST reference names them."""

    LIST_CONTAINERS = "ListContainers"
    GET_SERVICE_PROPERTIES = "GetBlobServiceProperties"
    SET_SERVICE_PROPERTIES = "SetBlobServiceProperties"
    GET_SERVICE_STATS = "GetBlobServiceStats"
    GET_ACCOUNT_INFO = "GetAccountInformation"
    CREATE_CONTAINER = "CreateContainer"
    DELETE_CONTAINER = "DeleteContainer"
    GET_CONTAINER_PROPERTIES = "GetContainerProperties"
    GET_CONTAINER_METADATA = "GetContainerMetadata"
    SET_CONTAINER_METADATA = "SetContainerMetadata"
    GET_CONTAINER_ACL = "GetContainerACL"
    SET_CONTAINER_ACL = "SetContainerACL"
    LEASE_CONTAINER = "LeaseContainer"
    LIST_BLOBS = "ListBlobs"
    PUT_BLOB = "PutBlob"
    PUT_BLOCK = "PutBlock"
    PUT_BLOCK_LIST = "PutBlockList"
    GET_BLOCK_LIST = "GetBlockList"
    APPEND_BLOCK = "AppendBlock"
    GET_BLOB = "GetBlob"
    QUERY_BLOB = "QueryBlobContents"
    GET_BLOB_PROPERTIES = "GetBlobProperties"
    SET_BLOB_PROPERTIES = "SetBlobProperties"
    GET_BLOB_METADATA = "GetBlobMetadata"
    SET_BLOB_METADATA = "SetBlobMetadata"
    DELETE_BLOB = "DeleteBlob"
    LEASE_BLOB = "LeaseBlob"
    SNAPSHOT_BLOB = "SnapshotBlob"
    COPY_BLOB = "CopyBlob"
    PUT_BLOB_FROM_URL = "PutBlobFromUrl"
    PUT_BLOCK_FROM_URL = "PutBlockFromUrl"
    APPEND_BLOCK_FROM_URL = "AppendBlockFromUrl"
    PUT_PAGE_FROM_URL = "PutPageFromUrl"
    ABORT_COPY = "AbortCopyBlob"
    SET_BLOB_TAGS = "SetBlobTags"
    GET_BLOB_TAGS = "GetBlobTags"
    FIND_BLOBS_BY_TAGS = "FindBlobsByTags"
    FIND_BLOBS_BY_TAGS_IN_CONTAINER = "FindBlobsByTagsInContainer"
    SUBMIT_BATCH = "SubmitBatch"
    GET_USER_DELEGATION_KEY = "GetUserDelegationKey"
    SET_BLOB_TIER = "SetBlobTier"
    SEAL_BLOB = "AppendBlobSeal"
    PUT_PAGE = "PutPage"
    GET_PAGE_RANGES = "GetPageRanges"
    INCREMENTAL_COPY = "IncrementalCopyBlob"
    UNDELETE_BLOB = "UndeleteBlob"
    RESTORE_CONTAINER = "RestoreContainer"
    SET_IMMUTABILITY_POLICY = "SetBlobImmutabilityPolicy"
    DELETE_IMMUTABILITY_POLICY = "DeleteBlobImmutabilityPolicy"
    SET_LEGAL_HOLD = "SetBlobLegalHold"


@dataclass(slots=True)  # not frozen: built on every request
class Route:
    account: str
    secondary: bool
    base: str  # {scheme}://{host}[/{account}]: the endpoint as the client addressed it
    kind: Kind
    container: str = ""
    blob: str = ""
    # Learnt about the request as it goes through the front-end (it is built per request):
    operation: Operation | None = None  # resolved once, before authentication needs it
    ticket: BlobTicket | None = None  # what the request is counted by (None: not counted, or refused)
    receive: Any = None  # the ASGI receive channel: handlers stream the body from it
    account_in_source: bool = False  # found by x-ms-rename-source: :func:`resolve_path_style_move`


def _slashes(raw_path: str) -> str:
    """A backslash in the path, as sent or percent-encoded, is a slash to Azure's front end: a
    blob uploaded as ``a\\b`` (``a%5Cb``) is listed and read as ``a/b``."""
    if "\\" in raw_path or "%5C" in raw_path or "%5c" in raw_path:
        return raw_path.replace("\\", "/").replace("%5C", "/").replace("%5c", "/")
    return raw_path


def resolve(
    scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]], restype: str | None
) -> Route:
    raw_path = _slashes(raw_path)
    account, secondary, base, segments = locate_account(scheme, host, decode_segments(raw_path)[1:], accounts)
    if raw_path.endswith("/") and len(segments) >= 2:
        segments = [*segments, ""]  # a blob name may end with a slash
    if not segments:
        return Route(account, secondary, base, Kind.SERVICE)
    if len(segments) == 1:
        if restype in ("container", "account"):
            return Route(account, secondary, base, Kind.CONTAINER, segments[0])
        return Route(account, secondary, base, Kind.BLOB, ROOT_CONTAINER, segments[0])
    return Route(account, secondary, base, Kind.BLOB, segments[0], "/".join(segments[1:]))


def resolve_path_style_move(
    scheme: str, host: str, raw_path: str, accounts: dict[str, list[bytes]], rename_source: str | None
) -> Route | None:
    """The route of the JavaScript Data Lake SDK's move on a path-style endpoint, or None.

    From ``http://127.0.0.1:10000/devstoreaccount1`` (``UseDevelopmentStorage=true``) that SDK
    replaces the destination URL's whole path, so the request goes to ``/{filesystem}/{path}``
    without the account, while ``x-ms-rename-source`` is the source URL's whole path,
    ``/{account}/{filesystem}/{path}``. Azure never sees either: its endpoints are host-style.
    The Shared Key signature covers ``/{account}/{filesystem}/{path}``, just what a host-style
    request's would, so a request whose path names no account is the account its rename source
    names, when that is one of ours; the dispatcher drops that segment from the source
    (:attr:`Route.account_in_source`). Account names need no percent-decoding."""
    if not rename_source or not is_path_style(host, accounts):
        return None
    first = rename_source.lstrip("/").split("/", 1)[0]
    if first not in accounts:
        return None
    route = resolve(scheme, host, f"/{first}{raw_path}", accounts, None)
    route.account_in_source = True
    return route
