"""The Blob service's front-end: an ASGI app for the Blob port (10000 by default).

The life of a request is :class:`tabulae.http.frontend.Frontend`'s: route (account, container,
blob) → admission (the account's target, injected faults) → the operation, resolved once
(:mod:`.operations`) → authentication (Shared Key and Shared Key Lite with the Blob/Queue
string-to-sign, bearer when enabled, account or blob SAS checked for the operation, or anonymous
where the container's ACL allows the operation) → its handler from :data:`HANDLERS` → a
response, streamed when it carries blob content. Errors are Azure's XML ``<Error>`` (HEAD and 304
answers carry only the code header).

The request body is not read up front: handlers read small documents whole (capped) and stream
content into the store as it arrives, so an upload is authenticated before a byte of it is read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from tabulae.admission.blobs import BlobTicket
from tabulae.admission.gate import Gate
from tabulae.auth.rbac import require
from tabulae.auth.sas import SasToken, StoredPolicy, parse_sas, stored_policies
from tabulae.auth.shared_key import verify_blob_queue_authorization
from tabulae.blob import encryption_guard
from tabulae.blob.api import (
    blobs,
    containers,
    copy_source,
    delegation_key,
    from_url,
    immutability,
    pages,
    query,
    tags,
)
from tabulae.blob.api.batch import BatchScope, FailedPart, adopt_version, check_operation, submit_batch
from tabulae.blob.api.call import Call
from tabulae.blob.api.encryption import ECHOES, request_encryption, write_headers
from tabulae.blob.api.operations import READ_ONLY, resolve_operation
from tabulae.blob.api.roles import NEEDS
from tabulae.blob.api.routing import Kind, Operation, Route, resolve, resolve_path_style_move
from tabulae.blob.api.sas import BlobGrant, anonymous_allowed, ever_anonymous, verify_blob_sas
from tabulae.blob.service import BlobService
from tabulae.http.errors import UTF8_BOM, XML_CONTENT_TYPE, error_xml
from tabulae.http.frontend import Frontend
from tabulae.http.messages import Request, Response, error_time
from tabulae.http.options import FrontendOptions
from tabulae.http.streaming import StreamedResponse
from tabulae.http.versions import DEFAULT_VERSION
from tabulae.insight.containers import ContainerCounters
from tabulae.model.errors import FrontEndRefusal, ServiceError
from tabulae.model.policies import CorsRule

SERVER_HEADER = (b"server", b"Tabulae/0.1 (Windows-Azure-Blob/1.0 compatible)")

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
    Operation.PUT_BLOB: pages.put_blob,
    Operation.PUT_BLOCK: blobs.put_block,
    Operation.PUT_BLOCK_LIST: blobs.put_block_list,
    Operation.GET_BLOCK_LIST: blobs.get_block_list,
    Operation.APPEND_BLOCK: blobs.append_block,
    Operation.GET_BLOB: blobs.get_blob,
    Operation.QUERY_BLOB: query.query_blob,
    Operation.GET_BLOB_PROPERTIES: blobs.get_blob_properties,
    Operation.SET_BLOB_PROPERTIES: pages.set_blob_properties,
    Operation.GET_BLOB_METADATA: blobs.get_blob_metadata,
    Operation.SET_BLOB_METADATA: blobs.set_blob_metadata,
    Operation.DELETE_BLOB: blobs.delete_blob,
    Operation.LEASE_BLOB: blobs.lease_blob,
    Operation.SNAPSHOT_BLOB: blobs.snapshot_blob,
    Operation.COPY_BLOB: from_url.copy_blob,
    Operation.ABORT_COPY: from_url.abort_copy,
    Operation.PUT_BLOB_FROM_URL: from_url.put_blob_from_url,
    Operation.PUT_BLOCK_FROM_URL: from_url.put_block_from_url,
    Operation.APPEND_BLOCK_FROM_URL: from_url.append_block_from_url,
    Operation.SET_BLOB_TAGS: tags.set_blob_tags,
    Operation.GET_BLOB_TAGS: tags.get_blob_tags,
    Operation.FIND_BLOBS_BY_TAGS: tags.find_blobs_by_tags,
    Operation.FIND_BLOBS_BY_TAGS_IN_CONTAINER: tags.find_blobs_by_tags,
    Operation.GET_USER_DELEGATION_KEY: delegation_key.get_user_delegation_key,
    Operation.SET_BLOB_TIER: blobs.set_blob_tier,
    Operation.SEAL_BLOB: blobs.seal_blob,
    Operation.PUT_PAGE: pages.put_page,
    Operation.PUT_PAGE_FROM_URL: from_url.put_page_from_url,
    Operation.GET_PAGE_RANGES: pages.get_page_ranges,
    Operation.INCREMENTAL_COPY: pages.incremental_copy,
    Operation.UNDELETE_BLOB: blobs.undelete_blob,
    Operation.RESTORE_CONTAINER: containers.restore_container,
    Operation.SET_IMMUTABILITY_POLICY: immutability.set_immutability_policy,
    Operation.DELETE_IMMUTABILITY_POLICY: immutability.delete_immutability_policy,
    Operation.SET_LEGAL_HOLD: immutability.set_legal_hold,
}

# Response headers Azure names in Access-Control-Expose-Headers besides a CORS rule's own list.
EXPOSED_HEADERS = (
    "x-ms-request-id,x-ms-client-request-id,Server,x-ms-version,Content-Type,Content-Length,Date,ETag,"
    "Last-Modified,Content-MD5,Content-Range,Accept-Ranges,x-ms-blob-type,x-ms-lease-status,"
    "x-ms-lease-state,x-ms-creation-time,x-ms-error-code,x-ms-structured-body,x-ms-structured-content-length"
)


class BlobApp(Frontend[Route]):
    """The ASGI callable of the Blob port, over a :class:`BlobService`."""

    server_header = SERVER_HEADER
    service_name = "blob"
    exposed_headers = EXPOSED_HEADERS

    def __init__(
        self,
        service: BlobService,
        options: FrontendOptions,
        gate: Gate | None = None,
        counters: ContainerCounters | None = None,
    ) -> None:
        super().__init__(options)
        self.service = service
        self.gate = gate
        self.counters = counters

    def route(self, request: Request) -> Route:
        host = request.headers.get("host", "127.0.0.1")
        try:
            route = resolve(
                request.scheme, host, request.raw_path, self.options.accounts, request.query.get("restype")
            )
        except ServiceError:
            moved = resolve_path_style_move(
                request.scheme, host, request.raw_path, self.options.accounts,
                request.headers.get("x-ms-rename-source"),
            )  # fmt: skip
            if moved is None:
                raise
            route = moved
        if self.counters is not None:
            route.ticket = BlobTicket(self.counters, route.account, route.container)
        return route

    async def receive_body(self, request: Request, receive: Any, route: Route) -> None:
        """Nothing is read here: handlers read documents whole and stream content."""
        route.receive = receive

    async def authenticate(self, request: Request, route: Route) -> None:
        """Admission first (a refused request does nothing), then the operation, then who sent it:
        Shared Key or bearer (the account's full rights), a SAS (its grant, checked for this
        operation), or nobody, where the container's ACL lets anyone do the operation."""
        if self.gate is not None and route.ticket is not None:
            try:
                self.gate.admit(route.ticket)
            except ServiceError:
                route.ticket = None  # refused, and counted as such by the gate
                raise
        operation = route.operation = resolve_operation(route, request.method, request.query, request.headers)
        request.operation = operation
        if request.batch is not None:
            check_operation(request, operation)
        if (
            request.headers.get("authorization") is None
            and route.kind is not Kind.SERVICE
            and ever_anonymous(operation)  # else 401, as at the service
            and parse_sas(request.query) is None
        ):
            record = await self.service.store.get_container(route.account, route.container)
            if record is not None and anonymous_allowed(operation, record.public_access):
                return
            raise ServiceError("ResourceNotFound")
        await super().authenticate(request, route)

    def verify_shared_key(self, request: Request, route: Route, header: str, keys: list[bytes]) -> None:
        """The Blob/Queue string-to-sign; a batch's sub-request is signed as of the batch's version,
        over the path it was sent with."""
        batch = request.batch
        if not isinstance(batch, BatchScope):
            super().verify_shared_key(request, route, header, keys)
            return
        verify_blob_queue_authorization(
            header,
            method=request.method,
            raw_path=batch.signed_path or request.raw_path,
            headers=request.headers,
            query_pairs=request.query_pairs,
            account=route.account,
            keys=keys,
            max_skew_seconds=self.options.clock_skew,
            version=batch.version,
        )

    async def verify_sas(
        self, request: Request, route: Route, token: SasToken, keys: list[bytes]
    ) -> BlobGrant:
        grant = verify_blob_sas(
            token,
            request.query,
            account=route.account,
            keys=keys,
            container=route.container,
            blob=route.blob,
            policy_lookup=await self._policies(route, token),
            is_https=request.scheme == "https",
            client_ip=request.client_ip,
            now=datetime.now(UTC),
            headers=request.headers,
        )
        assert route.operation is not None  # resolved before authentication
        grant.check(route.operation, request.headers.get("x-ms-version"))
        return grant

    async def _policies(self, route: Route, token: SasToken) -> Callable[[str], StoredPolicy | None] | None:
        """The stored access policies of the URL's container, when a service SAS names one (``si``)."""
        if token.si is None or token.is_account or not route.container:
            return None
        record = await self.service.store.get_container(route.account, route.container)
        return None if record is None else stored_policies(record.acl).get

    def frees_space(self, request: Request, route: Route) -> bool:
        """A Blob Batch too runs while the volume is full: its sub-requests come back through
        :meth:`respond`, where each is judged on its own (Delete Blob runs, Set Blob Tier is
        refused in its part), as Azure runs a batch's sub-requests independently."""
        return super().frees_space(request, route) or route.operation in (
            Operation.SUBMIT_BATCH,
            Operation.QUERY_BLOB,  # a read, by POST
        )

    async def dispatch(self, request: Request, route: Route, request_id: str) -> Response:
        operation = route.operation
        assert operation is not None  # resolved in authenticate
        if route.secondary and operation not in READ_ONLY:
            raise ServiceError("AuthorizationFailure")
        self.check_roles(request, operation)
        grant = request.grant if isinstance(request.grant, BlobGrant) else None
        call = Call(self.service, request, route, route.receive, self.options, grant)
        if request.batch is not None:
            adopt_version(request)
        if operation is Operation.SUBMIT_BATCH:
            return await submit_batch(call, request_id, self._run_part, self.route)
        encryption = await request_encryption(call, operation)
        token = encryption_guard.REQUEST.set(encryption)
        try:
            response = await HANDLERS[operation](call)
        finally:
            encryption_guard.REQUEST.reset(token)
        if encryption is not None and operation in ECHOES and response.status < 300:
            response.headers.extend(write_headers(encryption))
        if operation is Operation.SET_SERVICE_PROPERTIES:
            self.forget_cors_rules(route.account)
        return response

    def check_roles(self, request: Request, operation: Operation) -> None:
        """A bearer token held to its roles (``--oauth-role``) needs what the operation needs."""
        if request.actions is not None:
            require(request.actions, NEEDS.get(operation))

    async def _run_part(self, request: Request) -> tuple[str, Response]:
        """One sub-request of a batch, through the same pipeline as a request of its own."""
        request_id = self._ids.next()
        route, response = await self.respond(request, _no_body, request_id)
        if route is not None:
            self.answered(request, route, response)
        return request_id, response

    def answered(self, request: Request, route: Route, response: Response) -> None:
        ticket = route.ticket
        if ticket is None:
            return
        bytes_in = 0
        if request.method == "PUT" and response.status < 300:
            bytes_in = int(request.headers.get("content-length") or 0)
        sent = response.length if isinstance(response, StreamedResponse) and response.stream else 0
        ticket.answered(response.status, bytes_in=bytes_in, bytes_out=sent)

    async def load_cors_rules(self, account: str) -> list[CorsRule]:
        return (await self.service.get_service_properties(account)).common.cors

    def error_response(
        self, request: Request, route: Route | None, error: ServiceError, request_id: str
    ) -> Response:
        """Azure's XML ``<Error>`` after the UTF-8 byte order mark, as recorded; a HEAD request or
        a 304 gets the code header alone; a batch's sub-request keeps the error whole for its
        part."""
        if request.batch is not None:
            return FailedPart(error.status, error=error)
        if isinstance(error, FrontEndRefusal):
            return _front_end(request, error, request_id)
        error = copy_source.as_of(error, request.headers.get("x-ms-version", DEFAULT_VERSION))
        headers = [(b"x-ms-error-code", error.code.encode())]
        if error.headers:
            headers.extend(error.headers)
        if request.method == "HEAD" or error.status == 304:
            return Response(error.status, headers, unsized=copy_source.unsized(error))
        headers.append((b"content-type", XML_CONTENT_TYPE))
        line_break = route is not None and route.operation in _BREAK_AFTER_DECLARATION
        body = error_xml(error, request_id, error_time(), table_style=False, line_break=line_break)
        return Response(error.status, headers, UTF8_BOM + body)


# Operations whose errors Azure writes with a line break after the XML declaration, as the Java
# SDK's recordings show: Set Blob Tags (BlobApiTests.setTagsError 404 at x-ms-version 2023-08-03,
# setTagsLeaseFail 412 at 2024-02-04), Get Blob Tags (getTagsACFail 412), Restore Container
# (ServiceApiTests.restoreContainerError 404) and Append Blob Seal (AppendBlobApiTests.sealError
# 404 at 2024-08-04, sealACFail[5] and [6] 412), Query Blob Contents (BlobBaseApiTests.queryError
# 404) and Get Page Ranges (PageBlobApiTests.getPageRangesError 404, getPageRangesDiffError 400).
# Append Block From URL and Put Page From URL too (the Go SDK's TestAppendBlockFromURLWithMD5,
# Md5Mismatch at 2020-10-02, and TestAppendBlockFromURLCopySourceAuthNegative, 401 at 2023-11-03;
# Java's AppendBlobApiTests.appendBlockFromURLSourceErrorAndStatusCode, 409 at 2024-08-04; .NET's
# UploadPagesFromUriAsync_SourceBearerTokenFail, 400 at 2024-08-04), while Put Blob From URL's
# have none (.NET's SyncUploadFromUriAsync_SourceBearerTokenFail, 2025-05-05); the Rust SDK's
# append_blob_client_encryption/test_append_block_from_url_*_cpk_mismatch_fails (409, 304 and 525
# bytes at 2026-04-06) agree, where Append Block's own errors (test_append_block_position_condition)
# have none. Find Blobs by Tags at the account's URL too (.NET's ServiceClientTests/
# FindBlobsByTagAsync_Error, anonymous 401 NoAuthenticationInformation at 2024-08-04, 303 bytes,
# where the same refusal of Get Service Properties and Get Account Information has none); its
# container form's are not recorded. Set and Delete Blob Immutability Policy and Set Blob Legal
# Hold too (.NET's ImmutableStorageWithVersioningTests: SetImmutibilityPolicyAsync_Error 404 at
# 2026-06-06, SetImmutibilityPolicyAsync_IfModifiedSince_Failed 412 at 2026-06-06,
# DeleteImmutibilityPolicyAsync_Error and SetLegalHoldAsync_Error 404 at 2024-08-04, 216 bytes).
# Blob Batch's own refusals too (.NET's BlobBatchClientTests: Delete_Error, an anonymous batch,
# 401 NoAuthenticationInformation of 303 bytes, and Batch_SasUri_NotOwner, 403
# AuthenticationFailed under a container SAS, 444 bytes, both at 2024-08-04); its sub-responses
# are each their own operation's.
# Other operations' errors have none.
_BREAK_AFTER_DECLARATION = frozenset(
    {
        Operation.SET_BLOB_TAGS,
        Operation.GET_BLOB_TAGS,
        Operation.RESTORE_CONTAINER,
        Operation.SEAL_BLOB,
        Operation.QUERY_BLOB,
        Operation.GET_PAGE_RANGES,
        Operation.APPEND_BLOCK_FROM_URL,
        Operation.PUT_PAGE_FROM_URL,
        Operation.FIND_BLOBS_BY_TAGS,
        Operation.SET_IMMUTABILITY_POLICY,
        Operation.DELETE_IMMUTABILITY_POLICY,
        Operation.SET_LEGAL_HOLD,
        Operation.SUBMIT_BATCH,
    }
)


def _front_end(request: Request, error: FrontEndRefusal, request_id: str) -> Response:
    """A refusal as Azure's front-end writes it, recorded for an unknown ``x-ms-version`` (the
    Blob SDK's ``test_invalid_service_version_message``) and an invalid ``snapshot`` (the .NET
    SDK's GetBlockListAsync_Error): the XML error without an ``x-ms-error-code`` header (clients
    read the code from the body) and a line break after the declaration; no ``x-ms-version`` (the
    exchange echoes none for an unknown one, nor any when the error ``echoes`` nothing)."""
    silent = not error.echoes
    if request.method == "HEAD":
        return Response(error.status, [], silent=silent)
    body = UTF8_BOM + error_xml(error, request_id, error_time(), table_style=False, line_break=True)
    return Response(error.status, [(b"content-type", XML_CONTENT_TYPE)], body, silent=silent)


async def _no_body() -> dict[str, Any]:
    """The receive channel of a sub-request, whose body came inside the batch's."""
    return {"type": "http.request", "body": b"", "more_body": False}
