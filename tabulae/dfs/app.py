"""The Blob port's front-end with the Data Lake (DFS) API beside the Blob API.

For an IP host the DFS SDK sends its requests to the Blob endpoint, so each request is told
apart by what it carries (:mod:`tabulae.dfs.routing`): a Blob request goes on through
:class:`BlobApp` unchanged, a DFS one takes the same pipeline (admission, authentication,
errors) to a DFS handler, and its errors are written as the DFS API writes them (JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tabulae.auth.rbac import require
from tabulae.auth.sas import SasToken
from tabulae.blob import encryption_guard
from tabulae.blob.api import roles as blob_roles
from tabulae.blob.api.app import BlobApp
from tabulae.blob.api.call import Call
from tabulae.blob.api.containers import max_results
from tabulae.blob.api.encryption import encryption_of, write_headers
from tabulae.blob.api.routing import ROOT_CONTAINER, Kind, Operation, Route
from tabulae.blob.api.sas import BlobGrant, verify_blob_sas
from tabulae.blob.service import BlobService
from tabulae.dfs import blob_delete, blob_form_errors, blob_undelete, blob_write, formats, trash
from tabulae.dfs import roles as dfs_roles
from tabulae.dfs.access import ACL_DECIDED, AccessGuard, principal_of
from tabulae.dfs.acl import Principal
from tabulae.dfs.handlers import (
    BLOB_ACL_VERSION,
    BLOB_POSIX_VERSION,
    HANDLERS,
    DfsCall,
    path_headers,
    query_headers,
)
from tabulae.dfs.paths import normalize
from tabulae.dfs.routing import (
    READ_ONLY,
    DfsOperation,
    Location,
    Target,
    resolve,
    sas_allows,
    sas_permissions,
)
from tabulae.dfs.service import DataLakeService
from tabulae.http.frontend import Frontend
from tabulae.http.messages import Request, Response, error_time
from tabulae.http.versions import DEFAULT_VERSION
from tabulae.model.blobs import BlobKey, BlobRecord
from tabulae.model.errors import ServiceError
from tabulae.model.roles import Role


def location_of(request: Request, route: Route) -> Location:
    """The DFS location of a Blob route: a one-segment path is a file system, not a blob of
    ``$root``."""
    if route.kind is Kind.SERVICE:
        return Location(Target.ACCOUNT)
    if route.kind is Kind.CONTAINER:
        return Location(Target.FILESYSTEM, route.container)
    if route.container == ROOT_CONTAINER and ROOT_CONTAINER not in request.raw_path:
        return Location(Target.FILESYSTEM, route.blob)
    if route.blob.strip("/") == "":
        return Location(Target.FILESYSTEM, route.container)
    return Location(Target.PATH, route.container, route.blob)


DFS_REQUEST = "DfsRequest"
# Blob features an HNS account does not have ("Blob Storage feature support in Azure Storage
# accounts"): page blobs (and their incremental copies). Blob index tags it has now: recordings of
# real Azure (azure-storage-file-datalake 12.26, ``test_file.pyTestFiletest_data_lake_tags``) set
# and read them on a file of an HNS account, where the feature table once said no.
_REFUSED_COMP = frozenset({"page", "pagelist", "incrementalcopy"})
# What a flat account cannot do through the DFS API (pyarrow, Hadoop and Trino tell a flat
# account by Get Access Control's 400).
_HNS_ONLY = frozenset(
    {
        DfsOperation.GET_ACCESS_CONTROL, DfsOperation.SET_ACCESS_CONTROL,
        DfsOperation.SET_ACCESS_CONTROL_RECURSIVE, DfsOperation.RENAME,
    }
)  # fmt: skip
_UNSUPPORTED = frozenset({"UnsupportedQueryParameter", "UnsupportedHeader", "InvalidQueryParameterValue"})
# The DFS operations that take a customer-provided key or an encryption scope (and echo them),
# and those that must name the key of the file they change (blob/api/encryption.py).
_ENCRYPTED_WRITES = frozenset(
    {
        DfsOperation.CREATE_FILE, DfsOperation.CREATE_DIRECTORY, DfsOperation.APPEND,
        DfsOperation.CONCURRENT_APPEND, DfsOperation.FLUSH,
    }
)  # fmt: skip
_KEYED = frozenset({DfsOperation.APPEND, DfsOperation.CONCURRENT_APPEND, DfsOperation.FLUSH})


def _hns_refused(request: Request) -> bool:
    """Whether a Blob request uses a feature Azure refuses on an HNS account (cheap: no I/O)."""
    return request.query.get("comp") in _REFUSED_COMP or request.headers.get("x-ms-blob-type") == "PageBlob"


# What makes a DELETE the Blob API's own (a snapshot, a version, a permanent delete).
_BLOB_DELETE_PARAMETERS = frozenset({"snapshot", "versionid", "deletetype", "comp", "restype"})


def _dfs_sdk_delete(request: Request, route: Route) -> bool:
    """A bare DELETE of a path that asks for JSON: the DFS SDK's Delete File, which it sends
    without ``recursive`` (Azure tells it apart by the dfs host). It expects Delete Path's 200
    with the deletion id, where the Blob SDK's Delete Blob (asking for XML) expects 202. A SAS in
    the query leaves it Delete Path: the Java SDK's file delete with a read-only account SAS is
    Delete Path's 403 in JSON (recorded: SasTests.accountSasFileDeleteError, 2023-01-03)."""
    return (
        request.method == "DELETE"
        and route.kind is Kind.BLOB
        and not request.query.keys() & _BLOB_DELETE_PARAMETERS
        and "json" in request.headers.get("accept", "")
    )


def _rooted(blob: str) -> bool:
    """Whether a Blob API name starts with a slash that an HNS account's tree does not hold.

    A path's name has no empty segment there, and Azure reads ``/{filesystem}//{file}`` on the
    Blob endpoint of an HNS account as ``{file}``: recorded for azure-storage-file-datalake
    12.2's async ``test_read_file_async``, whose blob client kept the leading slash of the path
    ``/file...`` and got the file's content (206) from ``.../filesystemf8c0ea2//filef8c0ea2``.
    Only a leading slash is known; a name of slashes alone is left as it is."""
    return blob.startswith("/") and blob.strip("/") != ""


def _is_dfs(request: Request) -> bool:
    return isinstance(request.operation, DfsOperation) or request.operation == DFS_REQUEST


class DataLakeApp(BlobApp):
    """:class:`BlobApp` that also serves the DFS API on the same port and data."""

    def __init__(
        self, service: BlobService, *args: Any, roles: Mapping[str, Role] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(service, *args, **kwargs)
        self.dfs = DataLakeService(service)
        self.access = AccessGuard(self.dfs)
        self.roles = dict(roles or {})  # data roles by object ID (--oauth-role)

    def _dfs_operation(self, request: Request, route: Route) -> tuple[DfsOperation, Location] | None:
        location = location_of(request, route)
        if (
            location.target is Target.FILESYSTEM
            and "action" in request.query
            and "resource" not in request.query
        ):
            location = Location(Target.PATH, location.filesystem, "")  # the file system's root directory
        try:
            operation = resolve(location, request.method, request.query, request.headers)
        except ServiceError:
            request.operation = DFS_REQUEST  # a DFS request naming no operation: a DFS error
            raise
        return None if operation is None else (operation, location)

    async def authenticate(self, request: Request, route: Route) -> None:
        found = self._dfs_operation(request, route) if request.batch is None else None
        if found is None and _dfs_sdk_delete(request, route) and await self.dfs.is_hns(route.account):
            found = DfsOperation.DELETE_PATH, location_of(request, route)
        if found is None:
            try:
                await super().authenticate(request, route)
            except ServiceError as error:
                # a feature this server lacks altogether is still one an HNS account refuses
                if (
                    error.code in _UNSUPPORTED
                    and _hns_refused(request)
                    and await self.dfs.is_hns(route.account)
                ):
                    raise ServiceError("FeatureNotYetSupportedForHierarchicalNamespaceAccounts") from None
                raise
            if _hns_refused(request) and await self.dfs.is_hns(route.account):
                raise ServiceError("FeatureNotYetSupportedForHierarchicalNamespaceAccounts")
            if route.kind is Kind.BLOB and _rooted(route.blob) and await self.dfs.is_hns(route.account):
                route.blob = route.blob.lstrip("/")
            return
        operation, location = found
        if self.gate is not None and route.ticket is not None:
            try:
                self.gate.admit(route.ticket)
            except ServiceError:
                route.ticket = None
                raise
        request.operation = operation
        if operation in _HNS_ONLY and not await self.dfs.is_hns(route.account):
            raise ServiceError("HierarchicalNamespaceNotEnabled")
        if location.target is Target.PATH:
            route.container, route.blob = location.filesystem, normalize(location.path)
        elif location.target is Target.FILESYSTEM:
            route.container, route.blob = location.filesystem, ""
        await Frontend.authenticate(self, request, route)

    async def verify_sas(
        self, request: Request, route: Route, token: SasToken, keys: list[bytes]
    ) -> BlobGrant:
        operation = request.operation
        if not isinstance(operation, DfsOperation):
            return await super().verify_sas(request, route, token, keys)
        grant = verify_blob_sas(
            token,
            request.query,
            account=route.account,
            keys=keys,
            container=route.container,
            # a directory SAS lists its own directory: List Paths names it in the query
            blob=route.blob or normalize(request.query.get("directory", "")),
            policy_lookup=await self._policies(route, token),
            is_https=request.scheme == "https",
            client_ip=request.client_ip,
            now=datetime.now(UTC),
            headers=request.headers,
        )
        if not sas_allows("".join(grant.permissions), sas_permissions(operation, request.headers)):
            raise ServiceError("AuthorizationPermissionMismatch")
        return grant

    async def dispatch(self, request: Request, route: Route, request_id: str) -> Response:
        if route.account_in_source:  # signed as sent; from here on the source as Azure's clients send it
            source = request.headers["x-ms-rename-source"]
            request.headers["x-ms-rename-source"] = source.lstrip("/").removeprefix(route.account)
        operation = request.operation
        principal = principal_of(request.headers, self.roles)
        if isinstance(request.grant, BlobGrant) and request.grant.acl_user:
            principal = Principal(oid=request.grant.acl_user)  # a SAS with suoid: its user's ACLs apply
        acl_decided = False
        if (
            not principal.superuser
            and route.kind is not Kind.SERVICE
            and await self.dfs.is_hns(route.account)
        ):
            acl_decided = await self._check_acls(request, route, principal)
        if request.actions is not None and not acl_decided:  # a token held to its roles
            if isinstance(operation, DfsOperation):
                require(request.actions, dfs_roles.NEEDS.get(operation))
            else:
                assert route.operation is not None  # a Blob request's, resolved in authenticate
                super().check_roles(request, route.operation)
        if not isinstance(operation, DfsOperation):
            if route.kind is Kind.BLOB:
                answer = await self._blob_api_on_a_tree(request, route)
                if answer is not None:
                    return answer
            reading = request.method in ("HEAD", "GET") and route.kind is Kind.BLOB
            querying = route.operation is Operation.QUERY_BLOB
            path = await self._path_read(route) if reading or querying else None
            response = await super().dispatch(request, route, request_id)
            if (
                request.method == "PUT"
                and response.status == 201
                and route.kind is Kind.BLOB
                and "/" in route.blob
            ):
                await self._add_parents(route, request, principal)
            if (
                principal.creator is not None
                and route.kind is Kind.CONTAINER
                and request.method == "PUT"
                and response.status == 201
                and await self.dfs.is_hns(route.account)
            ):
                await self.dfs.claim_root(route.account, route.container, principal.creator)
            if path is not None and response.status < 300 and querying:
                response.headers[:] = query_headers(response.headers, path)
            elif path is not None and response.status < 300:
                version = request.headers.get("x-ms-version", DEFAULT_VERSION)
                response.headers.extend(
                    path_headers(path, acl=version >= BLOB_ACL_VERSION, posix=version >= BLOB_POSIX_VERSION)
                )
            if request.method == "DELETE" and route.kind is Kind.BLOB and response.status == 202:
                await self._add_deletion_id(route, request, response)
            return response
        if route.secondary and operation not in READ_ONLY:
            raise ServiceError("AuthorizationFailure")
        grant = request.grant if isinstance(request.grant, BlobGrant) else None
        call = Call(self.service, request, route, route.receive, self.options, grant)
        handler = HANDLERS.get(operation)
        if handler is None:
            raise ServiceError("NotImplemented")
        written = operation in _ENCRYPTED_WRITES
        encryption = await encryption_of(call, checks=operation in _KEYED, write=written)
        token = encryption_guard.REQUEST.set(encryption)
        try:
            response = await handler(
                DfsCall(call, self.dfs, operation, route.container, route.blob, principal, self.access)
            )
        finally:
            encryption_guard.REQUEST.reset(token)
        if written and response.status < 300:
            response.headers.extend(write_headers(encryption))
        return response

    def check_roles(self, request: Request, operation: Operation) -> None:
        """Nothing: :meth:`dispatch` has asked the roles (or, on an HNS account, the ACLs)."""

    async def _check_acls(self, request: Request, route: Route, principal: Principal) -> bool:
        """An HNS account's checks of a caller who is not a superuser: its role, then the ACLs
        (:mod:`tabulae.dfs.access`), for the operations the ACL model covers (on paths, and List
        Blobs, which lists a directory). True when they decided; False leaves the operation to
        the caller's role alone (file systems, containers, and, with roles enforced, what
        no ACL grants on a path: tags, immutability, undelete)."""
        operation = request.operation
        key = BlobKey(route.account, route.container, route.blob)
        if isinstance(operation, DfsOperation):
            await self.access.authorize(principal, operation, key, request.headers, request.query)
            return operation in ACL_DECIDED
        if route.kind is Kind.BLOB:
            if request.actions is not None and operation in blob_roles.ROLE_ONLY:
                return False
            await self.access.authorize_blob(principal, request.method, key, request.query.get("comp"))
            return True
        if operation == Operation.LIST_BLOBS:
            await self.access.authorize_list_blobs(principal, key, request.query, max_results(request.query))
            return True
        return False

    async def _add_parents(self, route: Route, request: Request, principal: Principal) -> None:
        """A blob written through the Blob API into an HNS account gets its parent directories,
        as Azure makes them (its namespace has no path without its parents), the caller's."""
        if request.query.get("comp") not in (None, "blocklist") or not await self.dfs.is_hns(route.account):
            return
        await self.dfs.ensure_directories(
            BlobKey(route.account, route.container, route.blob), creator=principal.creator
        )

    async def _path_read(self, route: Route) -> BlobRecord | None:
        """A path of an HNS account read through the Blob API: its record, for the owner,
        group, permissions and resource type Azure's answers carry; an expired file is gone
        (404) before the sweep deletes it. None for a flat account or a missing blob."""
        if not await self.dfs.is_hns(route.account):
            return None
        found = await self.service.store.get_blob(BlobKey(route.account, route.container, route.blob))
        if found is None:
            return None
        if trash.has_expired(found[0], self.service.clock()):
            raise ServiceError("BlobNotFound")
        return found[0]

    async def _blob_api_on_a_tree(self, request: Request, route: Route) -> Response | None:
        """The Blob API requests an HNS account answers as a tree: Delete Blob and Undelete
        Blob of a directory take its children along; a copy from a URL is refused below a file
        before its source is read. None: the Blob API answers as ever (and any other request,
        or a flat account, costs no lookup here)."""
        deleting, undeleting = blob_delete.applies(request), blob_undelete.applies(request)
        copying = blob_write.applies(request)
        if not (deleting or undeleting or copying) or not await self.dfs.is_hns(route.account):
            return None
        key = BlobKey(route.account, route.container, route.blob)
        if deleting:
            return await blob_delete.delete_directory(self.dfs, request, key)
        if undeleting:
            return await blob_undelete.undelete_directory(self.dfs, key)
        await blob_write.check_target(self.dfs, key)
        return None

    async def _add_deletion_id(self, route: Route, request: Request, response: Response) -> None:
        """Delete Blob of a path kept by soft delete on an HNS account answers the deletion's
        id, as Delete Path does: the DFS SDK deletes a file that way on the Blob port and
        hands the id to Undelete Path."""
        if request.query.get("snapshot") or request.query.get("versionid"):
            return
        if not await self.dfs.is_hns(route.account):
            return
        deletion = await self.dfs.last_deletion(BlobKey(route.account, route.container, route.blob))
        if deletion is not None:
            response.headers.append((b"x-ms-deletion-id", deletion.encode()))
            response.headers.append((b"x-ms-delete-type-permanent", b"false"))

    def error_response(
        self, request: Request, route: Route | None, error: ServiceError, request_id: str
    ) -> Response:
        if not _is_dfs(request):
            return super().error_response(request, route, error, request_id)
        if blob_form_errors.applies(request):
            return blob_form_errors.response(request, error, request_id)
        error = formats.dfs_error(error)
        headers = [(b"x-ms-error-code", error.code.encode())]
        if error.headers:
            headers.extend(error.headers)
        if request.method == "HEAD" or error.status == 304:
            return Response(error.status, headers)
        headers.append((b"content-type", formats.JSON_CONTENT_TYPE))
        return Response(error.status, headers, formats.error_body(error, request_id, error_time()))
