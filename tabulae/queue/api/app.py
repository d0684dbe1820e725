"""The Queue service's front-end: an ASGI app for the Queue port (10001 by default).

The life of a request is :class:`tabulae.http.frontend.Frontend`'s: route (account, queue,
message) → authentication (Shared Key and Shared Key Lite with the Blob/Queue string-to-sign,
bearer when enabled, account or queue SAS) → the operation, resolved once (:mod:`.operations`) →
the SAS check for that operation → its handler from :data:`HANDLERS`. Errors are Azure's generic
``<Error>`` XML with the byte order mark, without a body on HEAD requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from tabulae.auth.rbac import require
from tabulae.auth.sas import SasToken, StoredPolicy, stored_policies
from tabulae.http.delegation_key import issue_key
from tabulae.http.errors import XML_CONTENT_TYPE, error_xml
from tabulae.http.frontend import Call, Frontend
from tabulae.http.messages import Request, Response, error_time
from tabulae.http.options import FrontendOptions
from tabulae.http.versions import UnknownVersion
from tabulae.model.errors import ServiceError
from tabulae.model.policies import CorsRule
from tabulae.queue.api import handlers as ops
from tabulae.queue.api.formats import BOM
from tabulae.queue.api.operations import READ_OPERATIONS, Operation, resolve_operation
from tabulae.queue.api.roles import NEEDS
from tabulae.queue.api.routing import Route, resolve
from tabulae.queue.api.sas import QueueGrant, verify_sas
from tabulae.queue.service import QueueService

SERVER_HEADER = (b"server", b"Tabulae/0.1 (Windows-Azure-Queue/1.0 compatible)")

Handler = Callable[[ops.QueueCall], Awaitable[Response]]

HANDLERS: dict[Operation, Handler] = {
    Operation.LIST_QUEUES: ops.list_queues,
    Operation.GET_SERVICE_PROPERTIES: ops.get_service_properties,
    Operation.SET_SERVICE_PROPERTIES: ops.set_service_properties,
    Operation.GET_SERVICE_STATS: ops.get_service_stats,
    Operation.CREATE_QUEUE: ops.create_queue,
    Operation.DELETE_QUEUE: ops.delete_queue,
    Operation.GET_METADATA: ops.get_metadata,
    Operation.SET_METADATA: ops.set_metadata,
    Operation.GET_ACL: ops.get_acl,
    Operation.SET_ACL: ops.set_acl,
    Operation.PUT_MESSAGE: ops.put_message,
    Operation.GET_MESSAGES: ops.get_messages,
    Operation.PEEK_MESSAGES: ops.peek_messages,
    Operation.CLEAR_MESSAGES: ops.clear_messages,
    Operation.UPDATE_MESSAGE: ops.update_message,
    Operation.DELETE_MESSAGE: ops.delete_message,
}


class QueueApp(Frontend[Route]):
    """The ASGI callable of the Queue port, over a :class:`QueueService` (guarded or not)."""

    server_header = SERVER_HEADER
    service_name = "queue"
    exposed_headers = ops.EXPOSED_HEADERS

    def __init__(self, service: QueueService, options: FrontendOptions) -> None:
        super().__init__(options)
        self.service = service

    def route(self, request: Request) -> Route:
        host = request.headers.get("host", "127.0.0.1")
        return resolve(request.scheme, host, request.raw_path, self.options.accounts)

    async def verify_sas(
        self, request: Request, route: Route, token: SasToken, keys: list[bytes]
    ) -> QueueGrant:
        policies: dict[str, StoredPolicy] = {}
        if token.si is not None and route.queue and not token.is_account:
            try:
                identifiers = await self.service.get_acl(route.account, route.queue)
            except ServiceError:
                identifiers = []
            policies = stored_policies(identifiers)
        return verify_sas(
            token,
            account=route.account,
            keys=keys,
            queue=route.queue,
            policy_lookup=policies.get,
            is_https=request.scheme == "https",
            client_ip=request.client_ip,
            now=datetime.now(UTC),
            query=request.query,
        )

    async def dispatch(self, request: Request, route: Route, request_id: str) -> Response:
        query = request.query
        operation = resolve_operation(
            route.resource,
            request.method,
            comp=query.get("comp"),
            restype=query.get("restype"),
            peekonly=query.get("peekonly"),
        )
        request.operation = operation
        if route.secondary and operation not in READ_OPERATIONS:
            raise ServiceError("AuthorizationFailure")
        grant: QueueGrant | None = request.grant
        if operation is Operation.GET_USER_DELEGATION_KEY:
            return self._user_delegation_key(request, route)
        if grant is not None:
            grant.check(operation, request.headers.get("x-ms-version"))
        elif request.actions is not None:  # a bearer token, held to its roles
            require(request.actions, NEEDS.get(operation))
        response = await HANDLERS[operation](Call(self.service, request, route))
        if operation is Operation.SET_SERVICE_PROPERTIES:
            self.forget_cors_rules(route.account)
        return response

    def _user_delegation_key(self, request: Request, route: Route) -> Response:
        """Get User Delegation Key, for a bearer token only (a SAS or Shared Key is refused in
        :func:`issue_key`); once roles are enforced, for a token whose roles hold the Blob
        service's ``generateUserDelegationKey`` action (a Blob data role; no queue role does)."""
        if request.actions is not None:
            require(request.actions, NEEDS.get(Operation.GET_USER_DELEGATION_KEY))
        document = issue_key(
            request.headers.get("authorization"),
            request.body,
            service="q",
            version=ops.version_of(request),
            account_key=self.options.accounts[route.account][0],
        )
        return ops.xml_response(200, BOM + document)

    async def load_cors_rules(self, account: str) -> list[CorsRule]:
        return (await self.service.get_service_properties(account)).cors

    def error_response(
        self, request: Request, route: Route | None, error: ServiceError, request_id: str
    ) -> Response:
        # No Cache-Control on an error: Azure's recorded Queue errors carry none (404
        # QueueNotFound, 400 InvalidQueryParameterValue and OutOfRangeQueryParameterValue, 401,
        # 403 in the recordings of @azure/storage-queue's tests), where its successful reads say
        # no-cache. An unknown version is answered by Azure's common front-end (recorded for
        # "Invalid service version"): no x-ms-error-code either; clients read the body's code.
        headers = [(b"content-type", XML_CONTENT_TYPE)]
        if not isinstance(error, UnknownVersion):
            headers.insert(0, (b"x-ms-error-code", error.code.encode()))
        if error.headers:
            headers.extend(error.headers)
        body = (
            b""
            if request.method == "HEAD"
            else BOM + error_xml(error, request_id, error_time(), table_style=False)
        )
        return Response(error.status, headers, body)
