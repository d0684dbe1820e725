"""The Blob service's front-end: an ASGI app for the Blob port.

One request goes: ASGI scope → :class:`Request` → route (account, container, blob) → the
operation, resolved once (:mod:`.operations`) → authentication (Shared Key, bearer, SAS, or
anonymous where the container's ACL allows the operation) → its handler from :data:`HANDLERS`
→ a response, streamed when it carries blob content. A ``TableError`` raised anywhere below
becomes Azure's XML ``<Error>`` here, and only here (HEAD answers carry only the code header).

The request body is not read up front: handlers read small documents whole (capped) and stream
content into the store as it arrives, so an upload is authenticated before a byte of it is read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from tabulae.admission.blobs import BlobAdmission
from tabulae.auth.bearer import CHALLENGE, verify_bearer
from tabulae.auth.sas import StoredPolicy, parse_sas
from tabulae.auth.shared_key import verify_blob_queue_authorization
from tabulae.blob.api import blobs, containers
from tabulae.blob.api.call import Call
from tabulae.blob.api.operations import READ_ONLY, Operation, resolve_operation
from tabulae.blob.api.routing import Kind, Route, resolve
from tabulae.blob.api.sas import BlobGrant, anonymous_allowed, verify_blob_sas
from tabulae.blob.service import BlobService
from tabulae.http import cors
from tabulae.http.errors import XML_CONTENT_TYPE, error_xml
from tabulae.http.exchange import log_request, send_response
from tabulae.http.messages import Clock, Request, RequestIds, Response, error_time
from tabulae.http.options import FrontendOptions
from tabulae.http.protocol import META_NAMES_KEY
from tabulae.http.streaming import StreamedResponse, send_streamed
from tabulae.model.errors import TableError

log = logging.getLogger("tabulae")

Handler = Callable[[Call], Awaitable[Response]]

HANDLERS: dict[Operation, Handler] = {
    Operation.LIST_CONTAINERS: containers.list_containers,
    Operation.GET_SERVICE_PROPERTIES: containers.get_service_properties,
    Operation.SET_SERVICE_PROPERTIES: containers.set_service_properties,
    Operation.GET_SERVICE_STATS: containers.get_service_stats,
    Operation.GET_ACCOUNT_INFO: containers.get_account_info,
    Operation.CREATE_CONTAINER: containers.create_container,
    Operation.DELETE_CONTAINER: containers.delete_container,
    Operation.GET_CONTAINER_PROPERTIES: containers.get_container_properties,
    Operation.GET_CONTAINER_METADATA: containers.get_container_metadata,
    Operation.SET_CONTAINER_METADATA: containers.set_container_metadata,
    Operation.GET_CONTAINER_ACL: containers.get_container_acl,
    Operation.SET_CONTAINER_ACL: containers.set_container_acl,
    Operation.LEASE_CONTAINER: containers.lease_container,
    Operation.LIST_BLOBS: blobs.list_blobs,
    Operation.PUT_BLOB: blobs.put_blob,
    Operation.PUT_BLOCK: blobs.put_block,
    Operation.PUT_BLOCK_LIST: blobs.put_block_list,
    Operation.GET_BLOCK_LIST: blobs.get_block_list,
    Operation.APPEND_BLOCK: blobs.append_block,
    Operation.GET_BLOB: blobs.get_blob,
    Operation.GET_BLOB_PROPERTIES: blobs.get_blob_properties,
    Operation.SET_BLOB_PROPERTIES: blobs.set_blob_properties,
    Operation.GET_BLOB_METADATA: blobs.get_blob_metadata,
    Operation.SET_BLOB_METADATA: blobs.set_blob_metadata,
    Operation.DELETE_BLOB: blobs.delete_blob,
    Operation.LEASE_BLOB: blobs.lease_blob,
    Operation.SNAPSHOT_BLOB: blobs.snapshot_blob,
    Operation.COPY_BLOB: blobs.copy_blob,
    Operation.ABORT_COPY: blobs.abort_copy,
}

# Response headers Azure names in Access-Control-Expose-Headers besides a CORS rule's own list.
EXPOSED_HEADERS = (
    "x-ms-request-id,x-ms-client-request-id,Server,x-ms-version,Content-Type,Content-Length,Date,ETag,"
    "Last-Modified,Content-MD5,Content-Range,Accept-Ranges,x-ms-blob-type,x-ms-lease-status,"
    "x-ms-lease-state,x-ms-creation-time,x-ms-error-code"
)


class Anonymous:
    """Marks a request that carries no credentials but may go ahead (a public container)."""


class BlobApp:
    """The ASGI callable of the Blob port, over a :class:`BlobService` (guarded or not)."""

    def __init__(
        self, service: BlobService, options: FrontendOptions, admission: BlobAdmission | None = None
    ) -> None:
        self.service = service
        self.options = options
        self.admission = admission
        self._ids = RequestIds()
        self._clock = Clock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.perf_counter()
        request = Request.from_scope(scope)
        request_id = self._ids.next()
        route: Route | None = None
        refused = False
        bytes_in = 0
        try:
            route = resolve(
                request.scheme,
                request.headers.get("host", "127.0.0.1"),
                request.raw_path,
                self.options.accounts,
                request.query.get("restype"),
            )
            if request.method == "OPTIONS":
                response = await self._preflight(request, route)
            else:
                if self.admission is not None:
                    try:
                        self.admission.admit(route.account, route.container)
                    except TableError:
                        refused = True
                        raise
                response = await self._dispatch(request, route, receive, scope.get(META_NAMES_KEY))
                if request.method == "PUT" and response.status < 300:
                    bytes_in = int(request.headers.get("content-length") or 0)
        except TableError as error:
            response = self._error_response(request, error, request_id)
        except Exception:
            log.exception("unexpected error handling %s request", request.method)
            response = self._error_response(request, TableError("InternalError"), request_id)
        origin = request.headers.get("origin")
        if origin and route is not None and request.method != "OPTIONS":
            response.headers.extend(await self._cors_headers(route, origin, request.method))
        cased = [name for name, _ in response.headers if name[:10] == b"x-ms-meta-" and not name.islower()]
        if cased:
            response.preserve_case = cased
        if isinstance(response, StreamedResponse):
            try:
                await send_streamed(send, receive, request, response, request_id, self._clock)
            except TableError as error:  # content lost after the headers went out
                log.warning("blob download ended early: %s", error.detail or error.message)
                return
        else:
            await send_response(send, request, response, request_id, self._clock)
        if self.admission is not None and route is not None:
            sent = response.length if isinstance(response, StreamedResponse) and response.stream else 0
            self.admission.record(
                route.account,
                route.container,
                response.status,
                throttled=refused,
                bytes_in=bytes_in,
                bytes_out=sent,
            )
        if self.options.access_log:
            log_request(request, response.status, request_id, started)

    async def _dispatch(self, request: Request, route: Route, receive: Any, meta_names: Any) -> Response:
        operation = resolve_operation(route, request.method, request.query, request.headers)
        grant = await self._authenticate(request, route, operation)
        if route.secondary and operation not in READ_ONLY:
            raise TableError("AuthorizationFailure")
        call = Call(
            self.service,
            request,
            route,
            receive,
            self.options,
            grant if isinstance(grant, BlobGrant) else None,
            meta_names,
        )
        return await HANDLERS[operation](call)

    async def _authenticate(
        self, request: Request, route: Route, operation: Operation
    ) -> BlobGrant | Anonymous | None:
        """Shared Key or bearer (None: the account's full rights), a SAS (its grant, checked for
        this operation), or anonymous (only where the container's ACL allows the operation)."""
        keys = self.options.accounts[route.account]
        header = request.headers.get("authorization")
        if header is not None:
            if header.strip()[:7].lower() == "bearer ":
                if not self.options.oauth:
                    raise TableError("InvalidAuthenticationInfo")
                verify_bearer(header, route.account, service="blob")
                return None
            verify_blob_queue_authorization(
                header,
                method=request.method,
                raw_path=request.raw_path,
                headers=request.headers,
                query_pairs=parse_qsl(request.query_string, keep_blank_values=True),
                account=route.account,
                keys=keys,
                max_skew_seconds=self.options.clock_skew,
            )
            return None
        token = parse_sas(request.query)
        if token is not None:
            grant = verify_blob_sas(
                token,
                request.query,
                account=route.account,
                keys=keys,
                container=route.container,
                blob=route.blob,
                policy_lookup=await self._policies(route, token.si),
                is_https=request.scheme == "https",
                client_ip=request.client_ip,
                now=datetime.now(UTC),
            )
            grant.check(operation)
            return grant
        if route.kind is not Kind.SERVICE and route.container:
            record = await self.service.store.get_container(route.account, route.container)
            if record is not None and anonymous_allowed(operation, record.public_access):
                return Anonymous()
            raise TableError("ResourceNotFound")
        raise TableError("NoAuthenticationInformation", headers=[(b"www-authenticate", CHALLENGE)])

    async def _policies(
        self, route: Route, identifier: str | None
    ) -> Callable[[str], StoredPolicy | None] | None:
        """The stored access policies of the URL's container, when a SAS names one (``si``)."""
        if identifier is None or not route.container:
            return None
        record = await self.service.store.get_container(route.account, route.container)
        if record is None:
            return None
        policies = {i.id: StoredPolicy(i.start, i.expiry, i.permission) for i in record.acl if i.has_policy}
        return policies.get

    async def _preflight(self, request: Request, route: Route) -> Response:
        properties = await self.service.get_service_properties(route.account)
        return cors.preflight(properties.common.cors, request.headers)

    async def _cors_headers(self, route: Route, origin: str, method: str) -> list[tuple[bytes, bytes]]:
        try:
            properties = await self.service.get_service_properties(route.account)
        except TableError:
            return []
        return cors.actual_headers(properties.common.cors, origin, method, EXPOSED_HEADERS)

    def _error_response(self, request: Request, error: TableError, request_id: str) -> Response:
        """Azure's XML ``<Error>``; a HEAD request or a 304 gets the code header alone."""
        headers = [(b"x-ms-error-code", error.code.encode())]
        if error.headers:
            headers.extend(error.headers)
        if request.method == "HEAD" or error.status == 304:
            return Response(error.status, headers)
        headers.append((b"content-type", XML_CONTENT_TYPE))
        return Response(error.status, headers, error_xml(error, request_id, error_time(), table_style=False))
