"""The Blob service's SAS ("Create a service SAS", "Create an account SAS") and anonymous access.

A service SAS names a container (``sr=c``) or a blob (``sr=b``, its snapshot ``sr=bs``, its
version ``sr=bv``, whose version id is signed where a snapshot's time would be). Its
signature covers the canonical resource, which is built from the request's own URL, so a token
for one container or blob cannot be used on another: the signature no longer matches. What each
operation needs of the token's permissions is one table per kind of token below, keyed by the
operation resolved once in :mod:`.operations`. The checks every SAS shares (signature, stored
policy, validity window, protocol, IP, the account SAS) live in :mod:`tabulae.auth.sas`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tabulae.auth import delegation
from tabulae.auth.sas import (
    SasToken,
    StoredPolicy,
    apply_policy,
    check_ip,
    check_protocol,
    check_window,
    require_version,
    resource_type_mismatch,
    verify_account_sas,
    verify_signature,
)
from tabulae.blob.api.routing import Operation as Op
from tabulae.http.delegation_key import BEARER_ONLY
from tabulae.model.errors import ServiceError

# Versions from which the service SAS string-to-sign gained fields.
RESOURCE_FIELD_VERSION = "2018-11-09"  # sr and the snapshot time
ENCRYPTION_SCOPE_VERSION = "2020-12-06"  # ses
OVERRIDES = ("rscc", "rscd", "rsce", "rscl", "rsct")

# Each string is a set of alternative letters; every one of them must be met.
_Requirement = tuple[str, ...]

_BLOB_PERMISSIONS: dict[Op, _Requirement] = {
    Op.GET_BLOB: ("r",),
    Op.QUERY_BLOB: ("r",),
    Op.GET_BLOB_PROPERTIES: ("r",),
    Op.GET_BLOB_METADATA: ("r",),
    Op.GET_BLOCK_LIST: ("r",),
    Op.PUT_BLOB: ("cw",),
    Op.PUT_BLOCK: ("cw",),
    Op.PUT_BLOCK_LIST: ("cw",),
    Op.APPEND_BLOCK: ("aw",),
    Op.SET_BLOB_PROPERTIES: ("w",),
    Op.SET_BLOB_METADATA: ("w",),
    Op.SNAPSHOT_BLOB: ("cw",),
    Op.COPY_BLOB: ("cw",),
    Op.PUT_BLOB_FROM_URL: ("cw",),
    Op.PUT_BLOCK_FROM_URL: ("cw",),
    Op.APPEND_BLOCK_FROM_URL: ("aw",),
    Op.PUT_PAGE_FROM_URL: ("w",),
    Op.ABORT_COPY: ("w",),
    Op.LEASE_BLOB: ("wd",),
    Op.DELETE_BLOB: ("dxy",),  # d, x for a version, y to delete for good: see check_delete
    Op.SET_BLOB_TAGS: ("t",),
    Op.GET_BLOB_TAGS: ("t",),
    Op.SET_BLOB_TIER: ("w",),
    Op.SEAL_BLOB: ("w",),
    Op.PUT_PAGE: ("w",),
    Op.GET_PAGE_RANGES: ("r",),
    Op.INCREMENTAL_COPY: ("cw",),
    Op.UNDELETE_BLOB: ("w",),  # assumed: the reference names no permission for it
    Op.SET_IMMUTABILITY_POLICY: ("i",),
    Op.DELETE_IMMUTABILITY_POLICY: ("i",),
    Op.SET_LEGAL_HOLD: ("i",),
}
# What a container SAS adds: listing the container's blobs (and finding them by tags).
_CONTAINER_PERMISSIONS: dict[Op, _Requirement] = {
    **_BLOB_PERMISSIONS,
    Op.LIST_BLOBS: ("l",),
    Op.FIND_BLOBS_BY_TAGS_IN_CONTAINER: ("f",),
}
# The container itself a service SAS never reaches, whatever its permissions ("Create a service
# SAS": no reading or writing the container's properties or metadata, no leasing or deleting
# it; "use an account SAS instead"). Azure refuses them 403 AuthorizationFailure, as its answers
# to Get Container Properties under a container SAS show (azure-sdk-for-net#17142,
# azure-sdk-for-python#17094 and #24227), and to Create Container (a Data Lake file system) under
# one (sr=c, sp=racwdlmeop: the .NET SDK's FileSystemClientTests/CreateAsync_WithDataLakeServiceSas).
_CONTAINER_ITSELF = frozenset(
    {
        Op.CREATE_CONTAINER,
        Op.GET_CONTAINER_PROPERTIES,
        Op.GET_CONTAINER_METADATA,
        Op.SET_CONTAINER_METADATA,
        Op.LEASE_CONTAINER,
        Op.DELETE_CONTAINER,
    }
)
# Account SAS: (resource type letter, permission groups).
_ACCOUNT_RULES: dict[Op, tuple[str, _Requirement]] = {
    Op.LIST_CONTAINERS: ("s", ("l",)),
    Op.GET_SERVICE_PROPERTIES: ("s", ("r",)),
    Op.SET_SERVICE_PROPERTIES: ("s", ("w",)),
    Op.GET_SERVICE_STATS: ("s", ("r",)),
    Op.CREATE_CONTAINER: ("c", ("cw",)),
    Op.RESTORE_CONTAINER: ("c", ("w",)),  # assumed: the reference names no permission for it
    Op.DELETE_CONTAINER: ("c", ("d",)),
    Op.GET_CONTAINER_PROPERTIES: ("c", ("r",)),
    Op.GET_CONTAINER_METADATA: ("c", ("r",)),
    Op.SET_CONTAINER_METADATA: ("c", ("w",)),
    Op.GET_CONTAINER_ACL: ("c", ("r",)),
    Op.SET_CONTAINER_ACL: ("c", ("w",)),
    Op.LEASE_CONTAINER: ("c", ("wd",)),
    Op.LIST_BLOBS: ("c", ("l",)),
    Op.FIND_BLOBS_BY_TAGS: ("s", ("f",)),
    Op.FIND_BLOBS_BY_TAGS_IN_CONTAINER: ("c", ("f",)),
    **{op: ("o", requirement) for op, requirement in _BLOB_PERMISSIONS.items()},
}
# Anonymous reads a container's public access level allows ("Configure anonymous read access").
_PUBLIC_BLOB_READS = frozenset(
    {Op.GET_BLOB, Op.GET_BLOB_PROPERTIES, Op.GET_BLOB_METADATA, Op.GET_PAGE_RANGES, Op.QUERY_BLOB}
)
_PUBLIC_CONTAINER_READS = _PUBLIC_BLOB_READS | {
    Op.LIST_BLOBS,
    Op.GET_CONTAINER_PROPERTIES,
    Op.GET_CONTAINER_METADATA,
    Op.GET_BLOCK_LIST,
}


def ever_anonymous(operation: Op) -> bool:
    """Whether some public access level lets anyone perform ``operation`` (a read). For the
    others, an anonymous request is 401 NoAuthenticationInformation, as Azure answered the .NET
    SDK's anonymous Create Container and container Get Account Information; a read a container's
    ACL does not allow stays 404 ResourceNotFound (the Python SDK's test_no_sas_private_blob)."""
    return operation in _PUBLIC_CONTAINER_READS


def anonymous_allowed(operation: Op, public_access: str | None) -> bool:
    if public_access == "container":
        return operation in _PUBLIC_CONTAINER_READS
    if public_access == "blob":
        return operation in _PUBLIC_BLOB_READS
    return False


@dataclass(frozen=True, slots=True)
class BlobGrant:
    """What an authenticated SAS allows; ``check`` decides per operation.

    ``resource_types`` is set for an account SAS; ``scope`` is ``c`` or ``b``/``bs`` for a
    service SAS (whose container or blob the signature already pinned)."""

    permissions: frozenset[str]
    resource_types: frozenset[str] | None = None
    scope: str | None = None
    overrides: tuple[tuple[str, str], ...] = ()  # (query name, value) of rscc..rsct
    # A user delegation SAS's ``suoid``: the user whose access the path's ACLs decide (HNS only)
    acl_user: str | None = None

    def check(self, operation: Op, version: str | None = None) -> None:
        """Raise the service's 403 unless this SAS may perform ``operation``; ``version`` (the
        request's x-ms-version) decides whether a refused resource type is explained."""
        if operation is Op.GET_ACCOUNT_INFO:
            return
        if operation is Op.GET_USER_DELEGATION_KEY:  # Microsoft Entra ID only
            raise ServiceError("AuthenticationFailed", detail=BEARER_ONLY)
        if operation is Op.SUBMIT_BATCH:  # any permission: each sub-request is checked on its own
            if self.scope in ("b", "bs"):
                raise ServiceError("AuthorizationResourceTypeMismatch")
            return
        if self.resource_types is not None:
            resource_type, needed = _ACCOUNT_RULES.get(operation, ("", ()))
            if not resource_type or resource_type not in self.resource_types:
                raise resource_type_mismatch(resource_type or None, version)
        else:
            if self.scope == "c" and operation in _CONTAINER_ITSELF:
                raise ServiceError("AuthorizationFailure")
            table = _CONTAINER_PERMISSIONS if self.scope == "c" else _BLOB_PERMISSIONS
            if operation not in table:
                raise ServiceError("AuthorizationResourceTypeMismatch")
            needed = table[operation]
        for group in needed:
            if not self.permissions.intersection(group):
                raise ServiceError("AuthorizationPermissionMismatch")

    def check_delete(self, version: bool, permanent: bool = False) -> None:
        """Delete Blob needs ``y`` (permanent delete) with ``deletetype=permanent``, else ``x``
        (delete version) for a version and ``d`` for anything else."""
        needed = "y" if permanent else "x" if version else "d"
        if needed not in self.permissions:
            raise ServiceError("AuthorizationPermissionMismatch")

    @property
    def create_only(self) -> bool:
        """A token that may create blobs but not overwrite them (``c`` without ``w``)."""
        return "c" in self.permissions and "w" not in self.permissions


def service_sas_string_to_sign(
    token: SasToken, resource: str, sr: str, snapshot: str, overrides: dict[str, str]
) -> str:
    """The fields of "Create a service SAS" for the token's version, joined by LF."""
    version = token.sv or ""
    values: list[str | None] = [
        token.sp,
        token.st,
        token.se,
        resource,
        token.si,
        token.sip,
        token.spr,
        token.sv,
    ]
    if version >= RESOURCE_FIELD_VERSION:
        values += [sr, snapshot]
    if version >= ENCRYPTION_SCOPE_VERSION:
        values.append(token.ses)
    values += [overrides.get(name) for name in OVERRIDES]
    return "\n".join(value or "" for value in values)


def verify_blob_sas(
    token: SasToken,
    query: dict[str, str],
    *,
    account: str,
    keys: Sequence[bytes],
    container: str,
    blob: str,
    policy_lookup: Callable[[str], StoredPolicy | None] | None,
    is_https: bool,
    client_ip: str | None,
    now: datetime,
    headers: Mapping[str, str] | None = None,
) -> BlobGrant:
    """Authenticate a SAS on a request for ``container``/``blob`` (empty when the URL names none)."""
    require_version(token)
    overrides = {name: query[name] for name in OVERRIDES if name in query}
    pairs = tuple(overrides.items())
    if token.is_account:
        granted = verify_account_sas(
            token, account=account, keys=keys, service="b", is_https=is_https, client_ip=client_ip, now=now
        )
        return BlobGrant(granted.permissions, granted.resource_types, overrides=pairs)
    sr = query.get("sr", "")
    if sr in ("c", "b", "bs", "bv", "d") and not container:
        # A service SAS on a request for the account (a Blob Batch, say): Azure's recorded words.
        raise ServiceError(
            "AuthenticationFailed",
            detail="The specified signed resource is not allowed for this resource level",
        )
    if sr not in ("c", "b", "bs", "bv", "d") or (sr not in ("c", "d") and not blob):
        raise ServiceError(
            "AuthenticationFailed", detail=f"The signed resource (sr) '{sr}' does not fit the URL."
        )
    if sr == "d":
        resource = f"/blob/{account}/{container}" + directory_of(blob, query.get("sdd", ""))
    else:
        resource = f"/blob/{account}/{container}" + (f"/{blob}" if sr != "c" else "")
    snapshot = query.get("snapshot", "") if sr == "bs" else query.get("versionid", "") if sr == "bv" else ""
    if delegation.is_delegation_sas(query):
        if token.si is not None:
            raise ServiceError(
                "AuthenticationFailed", detail="A user delegation SAS cannot name a stored access policy."
            )
        key = delegation.key_of_token(query, now)
        signed = delegation.string_to_sign(query, resource=resource, snapshot=snapshot, headers=headers or {})
        verify_signature(token.sig, signed, delegation.key_values(key, keys))
        sp, st, se = token.sp or "", token.st, token.se
    else:
        verify_signature(
            token.sig, service_sas_string_to_sign(token, resource, sr, snapshot, overrides), keys
        )
        sp, st, se = apply_policy(token, policy_lookup)
    check_window(st, se, now, blob=True)
    check_protocol(token.spr, is_https)
    check_ip(token.sip, client_ip, service="b")
    acl_user = (query.get("suoid") or None) if delegation.is_delegation_sas(query) else None
    return BlobGrant(frozenset(sp), scope=sr, overrides=pairs, acl_user=acl_user)


def directory_of(path: str, depth: str) -> str:
    """The directory a directory SAS (``sr=d``) was signed for: the first ``sdd`` segments of
    the requested path ("Create a service SAS": the depth is the number of directories beneath
    the root), so the token serves that directory and everything under it and nothing beside
    it, as the signature covers the directory's name."""
    if not depth.isdigit():
        raise ServiceError(
            "AuthenticationFailed", detail="The directory depth (sdd) must be a non-negative integer."
        )
    segments = [segment for segment in path.split("/") if segment]
    count = int(depth)
    if count > len(segments):
        raise ServiceError("AuthenticationFailed", detail="The directory depth (sdd) does not fit the URL.")
    return "".join(f"/{segment}" for segment in segments[:count])
