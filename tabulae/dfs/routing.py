"""Which requests on the Blob port are Data Lake (DFS) requests, and which DFS operation each is.

Azure serves the DFS API on its own host (``<account>.dfs.core.windows.net``), but for an IP host
(the emulator form, ``http://127.0.0.1:10000/devstoreaccount1``) ``azure-storage-file-datalake``
sends DFS and Blob requests to the same host and port, so a request must be told apart by what it
carries. What the SDK sends was captured through a loopback transport (tests/dfs/
test_dfs_routing.py replays every operation); the operations are those of the "Data Lake Storage
Gen2" REST reference (Filesystem: Create, Delete, Get Properties, Set Properties, List Paths; Path:
Create, Update, Lease, Read, Get Properties, Delete, List; Filesystem List at the account).

The rules, in order (each one a fact of the Blob API that the DFS API cannot collide with):

1. ``comp`` or ``restype`` present: a Blob request, except three operations the DFS SDK sends in
   the Blob form for HNS accounts: ``comp=expiry`` (Set Expiry), ``comp=undelete`` with
   ``x-ms-undelete-source`` (Undelete Path; the Blob API's Undelete Blob has no such header) and
   ``restype=container&comp=list&showonly=deleted`` (List Deleted Paths).
2. A query parameter only the DFS API has (``resource``, ``action``, ``mode``, ``position``,
   ``recursive``, ``directory``, ``upn``, ``continuation``, ``maxRecords``, ``forceFlag``,
   ``retainUncommittedData``, ``close``, ``flush``, ``paginated``, ``beginFrom``): DFS. Blob's
   continuation parameter is ``marker``, its listing limit ``maxresults``.
3. ``PATCH`` (the Blob API has no PATCH) and ``POST`` without ``comp`` with ``x-ms-lease-action``
   (Path Lease): DFS. A bare ``POST`` stays the Blob API's 405 ``UnsupportedHttpVerb``.
4. ``x-ms-rename-source``: DFS (Rename; the SDK always adds ``mode=legacy``, raw callers need not).
5. ``PUT`` without ``x-ms-blob-type`` carrying a DFS-only header (``x-ms-owner``, ``x-ms-group``,
   ``x-ms-permissions``, ``x-ms-acl``, ``x-ms-umask``, ``x-ms-properties``): DFS, which then asks
   for ``resource`` (assumed: Azure's answer to such a request was not recorded).

Everything else, including the operations the DFS SDK itself performs through the Blob API
(create/delete/properties/metadata of a file system as a container, Get Properties and Read of a
path as HEAD/GET of a blob, Delete of a file without ``recursive``, leases by ``comp=lease``,
List File Systems as List Containers), is a Blob request. A DFS request whose parameters are
wrong gets the DFS error (400 ``MissingRequiredQueryParameter`` / ``InvalidQueryParameterValue``,
405 ``UnsupportedHttpVerb``), never a fall-back to the Blob API.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tabulae.model.errors import ServiceError


class Target(enum.Enum):
    ACCOUNT = "account"
    FILESYSTEM = "filesystem"
    PATH = "path"


class DfsOperation(enum.StrEnum):
    """Every DFS operation, named as the REST reference (and Azure's analytics logs) name them."""

    LIST_FILESYSTEMS = "ListFilesystems"
    CREATE_FILESYSTEM = "CreateFilesystem"
    DELETE_FILESYSTEM = "DeleteFilesystem"
    GET_FILESYSTEM_PROPERTIES = "GetFilesystemProperties"
    SET_FILESYSTEM_PROPERTIES = "SetFilesystemProperties"
    LIST_PATHS = "ListPaths"
    LIST_DELETED_PATHS = "ListDeletedPaths"
    CREATE_FILE = "CreateFile"
    CREATE_DIRECTORY = "CreateDirectory"
    RENAME = "RenamePath"
    APPEND = "AppendFile"
    CONCURRENT_APPEND = "ConcurrentAppendFile"
    FLUSH = "FlushFile"
    SET_PROPERTIES = "SetPathProperties"
    SET_ACCESS_CONTROL = "SetPathAccessControl"
    SET_ACCESS_CONTROL_RECURSIVE = "SetPathAccessControlRecursive"
    READ = "ReadFile"
    GET_PROPERTIES = "GetPathProperties"
    GET_STATUS = "GetPathStatus"
    GET_ACCESS_CONTROL = "GetPathAccessControl"
    DELETE_PATH = "DeletePath"
    LEASE = "LeasePath"
    SET_EXPIRY = "SetPathExpiry"
    UNDELETE = "UndeletePath"


class RecursiveMode(enum.StrEnum):
    """``mode`` of Set Access Control Recursive: replace, merge into, or remove from each ACL."""

    SET = "set"
    MODIFY = "modify"
    REMOVE = "remove"


#: ``x-ms-lease-action`` of Path Lease ("Path - Lease").
LEASE_ACTIONS = frozenset({"acquire", "break", "change", "renew", "release"})
#: ``x-ms-lease-action`` on Append (REST 2023-08-03 and later: "Path - Update").
APPEND_LEASE_ACTIONS = frozenset({"acquire", "auto-renew", "release", "acquire-release"})
#: ``mode`` of a rename: both name the same atomic rename on an HNS account.
RENAME_MODES = frozenset({"legacy", "posix"})

_DFS_QUERY = frozenset(
    {
        "resource", "action", "mode", "position", "recursive", "directory", "upn", "continuation",
        "maxRecords", "forceFlag", "retainUncommittedData", "close", "flush", "paginated", "beginFrom",
    }
)  # fmt: skip
_DFS_PUT_HEADERS = (
    "x-ms-owner",
    "x-ms-group",
    "x-ms-permissions",
    "x-ms-acl",
    "x-ms-umask",
    "x-ms-properties",
)

READ_ONLY = frozenset(
    {
        DfsOperation.LIST_FILESYSTEMS, DfsOperation.GET_FILESYSTEM_PROPERTIES, DfsOperation.LIST_PATHS,
        DfsOperation.LIST_DELETED_PATHS, DfsOperation.READ, DfsOperation.GET_PROPERTIES,
        DfsOperation.GET_STATUS, DfsOperation.GET_ACCESS_CONTROL,
    }
)  # fmt: skip


# The SAS permissions each operation needs: every group of the tuple must be granted, by any one
# of its letters. From the permission descriptions of the DFS SDK's SAS classes ("Create a
# service SAS"): r reads content, properties and metadata; c creates; w writes content,
# properties and metadata and leases; a appends; d deletes; l lists; m moves; e gets status and
# ACL (and lets an owner set access control, which the caller decides); o sets owner and group;
# p sets permissions and ACLs. Assumed: e or r for Get Status and Get Access Control, w for Set
# Expiry and Undelete.
_SAS_PERMISSIONS: dict[DfsOperation, tuple[str, ...]] = {
    DfsOperation.LIST_FILESYSTEMS: ("l",),
    DfsOperation.CREATE_FILESYSTEM: ("c",),
    DfsOperation.DELETE_FILESYSTEM: ("d",),
    DfsOperation.GET_FILESYSTEM_PROPERTIES: ("r",),
    DfsOperation.SET_FILESYSTEM_PROPERTIES: ("w",),
    DfsOperation.LIST_PATHS: ("l",),
    DfsOperation.LIST_DELETED_PATHS: ("l",),
    DfsOperation.CREATE_FILE: ("cw",),
    DfsOperation.CREATE_DIRECTORY: ("cw",),
    DfsOperation.RENAME: ("mw",),  # Azure renames with a SAS of rcwd too (the SDK's live tests)
    DfsOperation.APPEND: ("aw",),
    DfsOperation.CONCURRENT_APPEND: ("aw",),
    DfsOperation.FLUSH: ("w",),
    DfsOperation.SET_PROPERTIES: ("w",),
    DfsOperation.SET_ACCESS_CONTROL_RECURSIVE: ("p",),
    DfsOperation.READ: ("r",),
    DfsOperation.GET_PROPERTIES: ("r",),
    DfsOperation.GET_STATUS: ("er",),
    DfsOperation.GET_ACCESS_CONTROL: ("er",),
    DfsOperation.DELETE_PATH: ("d",),
    DfsOperation.LEASE: ("w",),
    DfsOperation.SET_EXPIRY: ("w",),
    DfsOperation.UNDELETE: ("w",),
}


def sas_permissions(operation: DfsOperation, headers: Mapping[str, str]) -> tuple[str, ...]:
    """What a SAS must grant for ``operation`` (see the table above); Set Access Control needs
    o for ``x-ms-owner``/``x-ms-group`` and p for ``x-ms-permissions``/``x-ms-acl``."""
    if operation is DfsOperation.SET_ACCESS_CONTROL:
        needs = []
        if "x-ms-owner" in headers or "x-ms-group" in headers:
            needs.append("o")
        if "x-ms-permissions" in headers or "x-ms-acl" in headers or not needs:
            needs.append("p")
        return tuple(needs)
    return _SAS_PERMISSIONS[operation]


def sas_allows(granted: str, needed: tuple[str, ...]) -> bool:
    """Whether a SAS's ``sp`` letters cover every group of ``needed``."""
    return all(any(letter in granted for letter in group) for group in needed)


@dataclass(frozen=True, slots=True)
class Location:
    """What a DFS URL names below the account: the account itself, a file system, or a path in
    one (``path`` as it came, decoded; :func:`tabulae.dfs.paths.normalize` checks it)."""

    target: Target
    filesystem: str = ""
    path: str = ""


def locate(segments: Sequence[str]) -> Location:
    """The location of a request from its decoded path segments after the account (as
    ``tabulae.http.addressing.decode_segments`` gives them). ``/fs`` and ``/fs/`` name the file
    system; anything longer a path in it."""
    if not segments or (len(segments) == 1 and segments[0] == ""):
        return Location(Target.ACCOUNT)
    filesystem = segments[0]
    rest = "/".join(segments[1:])
    if rest.strip("/") == "":
        return Location(Target.FILESYSTEM, filesystem)
    return Location(Target.PATH, filesystem, rest)


def missing_parameter(name: str) -> ServiceError:
    return ServiceError("MissingRequiredQueryParameter", fields=(("QueryParameterName", name),))


def invalid_parameter(name: str, value: str) -> ServiceError:
    return ServiceError(
        "InvalidQueryParameterValue", fields=(("QueryParameterName", name), ("QueryParameterValue", value))
    )


def _blob_form(target: Target, query: Mapping[str, str], headers: Mapping[str, str]) -> DfsOperation | None:
    """Rule 1: the DFS operations the SDK sends in the Blob API's form; None for Blob requests."""
    comp = query.get("comp")
    if target is Target.PATH and comp == "expiry":
        return DfsOperation.SET_EXPIRY
    if target is Target.PATH and comp == "undelete" and "x-ms-undelete-source" in headers:
        return DfsOperation.UNDELETE
    if (
        target is Target.FILESYSTEM
        and comp == "list"
        and query.get("restype") == "container"
        and query.get("showonly") == "deleted"
    ):
        return DfsOperation.LIST_DELETED_PATHS
    return None


def is_dfs(method: str, query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
    """Rules 2 to 5 (rule 1 is :func:`resolve`'s): whether a request without ``comp`` or
    ``restype`` is a DFS one. Cheap on the Blob hot path: a set intersection and a few lookups."""
    if query and not _DFS_QUERY.isdisjoint(query):
        return True
    if method == "PATCH" or (method == "POST" and "x-ms-lease-action" in headers):
        return True
    if "x-ms-rename-source" in headers:
        return True
    if method == "PUT" and "x-ms-blob-type" not in headers:
        return any(name in headers for name in _DFS_PUT_HEADERS)
    return False


def _verb(method: str, table: Mapping[str, DfsOperation]) -> DfsOperation:
    operation = table.get(method)
    if operation is None:
        raise ServiceError("UnsupportedHttpVerb")
    return operation


def _account(method: str, query: Mapping[str, str]) -> DfsOperation:
    resource = query.get("resource")
    if resource is None:
        raise missing_parameter("resource")
    if resource != "account":
        raise invalid_parameter("resource", resource)
    return _verb(method, {"GET": DfsOperation.LIST_FILESYSTEMS})


def _filesystem(method: str, query: Mapping[str, str]) -> DfsOperation:
    resource = query.get("resource")
    if resource is None:
        raise missing_parameter("resource")
    if resource != "filesystem":
        raise invalid_parameter("resource", resource)
    return _verb(
        method,
        {
            "PUT": DfsOperation.CREATE_FILESYSTEM,
            "DELETE": DfsOperation.DELETE_FILESYSTEM,
            "HEAD": DfsOperation.GET_FILESYSTEM_PROPERTIES,
            "PATCH": DfsOperation.SET_FILESYSTEM_PROPERTIES,
            "GET": DfsOperation.LIST_PATHS,
        },
    )


_PATCH_ACTIONS = {
    "append": DfsOperation.APPEND,
    "concurrentAppend": DfsOperation.CONCURRENT_APPEND,
    "flush": DfsOperation.FLUSH,
    "setProperties": DfsOperation.SET_PROPERTIES,
    "setAccessControl": DfsOperation.SET_ACCESS_CONTROL,
    "setAccessControlRecursive": DfsOperation.SET_ACCESS_CONTROL_RECURSIVE,
}
_HEAD_ACTIONS = {"getAccessControl": DfsOperation.GET_ACCESS_CONTROL, "getStatus": DfsOperation.GET_STATUS}


def _create(query: Mapping[str, str], headers: Mapping[str, str]) -> DfsOperation:
    if "x-ms-rename-source" in headers:
        mode = query.get("mode")
        if mode is not None and mode not in RENAME_MODES:
            raise invalid_parameter("mode", mode)
        return DfsOperation.RENAME
    resource = query.get("resource")
    if resource is None:
        raise missing_parameter("resource")
    if resource == "file":
        return DfsOperation.CREATE_FILE
    if resource == "directory":
        return DfsOperation.CREATE_DIRECTORY
    raise invalid_parameter("resource", resource)


def _update(query: Mapping[str, str]) -> DfsOperation:
    action = query.get("action")
    if action is None:
        raise missing_parameter("action")
    operation = _PATCH_ACTIONS.get(action)
    if operation is None:
        raise invalid_parameter("action", action)
    if operation is DfsOperation.SET_ACCESS_CONTROL_RECURSIVE:
        recursive_mode(query)
    return operation


def _path(method: str, query: Mapping[str, str], headers: Mapping[str, str]) -> DfsOperation:
    if method == "PUT":
        return _create(query, headers)
    if method == "PATCH":
        return _update(query)
    if method == "HEAD":
        action = query.get("action")
        if action is None:
            return DfsOperation.GET_PROPERTIES
        operation = _HEAD_ACTIONS.get(action)
        if operation is None:
            raise invalid_parameter("action", action)
        return operation
    if method == "POST":
        lease_action(headers)
        return DfsOperation.LEASE
    return _verb(method, {"GET": DfsOperation.READ, "DELETE": DfsOperation.DELETE_PATH})


def resolve(
    location: Location, method: str, query: Mapping[str, str], headers: Mapping[str, str]
) -> DfsOperation | None:
    """The DFS operation of a request to ``location``, or None when it is a Blob request (the
    module docstring's rules). ``headers`` are lower-case names; raises the DFS error for a DFS
    request whose verb or parameters name no operation."""
    if "comp" in query or "restype" in query:
        operation = _blob_form(location.target, query, headers)
        if operation is not None and operation is not DfsOperation.LIST_DELETED_PATHS:
            return _verb(method, {"PUT": operation})
        if operation is not None:
            return _verb(method, {"GET": operation})
        return None
    if not is_dfs(method, query, headers):
        return None
    if location.target is Target.ACCOUNT:
        return _account(method, query)
    if location.target is Target.FILESYSTEM:
        return _filesystem(method, query)
    return _path(method, query, headers)


def recursive_mode(query: Mapping[str, str]) -> RecursiveMode:
    """``mode`` of Set Access Control Recursive: required, one of set, modify, remove."""
    mode = query.get("mode")
    if mode is None:
        raise missing_parameter("mode")
    try:
        return RecursiveMode(mode)
    except ValueError:
        raise invalid_parameter("mode", mode) from None


def lease_action(headers: Mapping[str, str]) -> str:
    """``x-ms-lease-action`` of Path Lease: required, one of :data:`LEASE_ACTIONS`."""
    action = headers.get("x-ms-lease-action")
    if action is None:
        raise ServiceError("MissingRequiredHeader", fields=(("HeaderName", "x-ms-lease-action"),))
    if action not in LEASE_ACTIONS:
        raise ServiceError(
            "InvalidHeaderValue", fields=(("HeaderName", "x-ms-lease-action"), ("HeaderValue", action))
        )
    return action


def flag(query: Mapping[str, str], name: str, default: bool | None = None) -> bool | None:
    """A boolean query parameter (``recursive``, ``upn``, ``close``, ``retainUncommittedData``,
    ``flush``, ``forceFlag``, ``paginated``): ``true`` or ``false`` in any case, else 400
    ``InvalidQueryParameterValue``; ``default`` when absent."""
    value = query.get(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise invalid_parameter(name, value)


def count(query: Mapping[str, str], name: str, *, minimum: int = 0, maximum: int | None = None) -> int | None:
    """A non-negative integer query parameter (``position``, ``maxResults``, ``maxRecords``):
    decimal digits only, else 400 ``InvalidQueryParameterValue``; outside ``minimum``..``maximum``
    400 ``OutOfRangeQueryParameterValue``; None when absent."""
    value = query.get(name)
    if value is None:
        return None
    if not value.isascii() or not value.isdigit():
        raise invalid_parameter(name, value)
    number = int(value)
    if number < minimum or (maximum is not None and number > maximum):
        raise ServiceError(
            "OutOfRangeQueryParameterValue",
            fields=(("QueryParameterName", name), ("QueryParameterValue", value)),
        )
    return number
