"""The Table service's front-end: an ASGI app for the Table port.

One request goes (the life of every front-end's request is :class:`tabulae.http.frontend.Frontend`):
route (account and resource) → authentication → the operation, resolved once (:mod:`.operations`)
→ the SAS check for that operation → its handler from :data:`HANDLERS`. A ``ServiceError`` raised
anywhere below becomes the Azure error body: JSON for the OData operations, XML for the
service-level and ``comp`` ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from tabulae.auth.rbac import require
from tabulae.auth.sas import SasToken, StoredPolicy, stored_policies
from tabulae.auth.shared_key import verify_authorization
from tabulae.http.errors import XML_CONTENT_TYPE, error_json, error_xml
from tabulae.http.frontend import Call, Frontend
from tabulae.http.messages import NOSNIFF, Request, Response, error_time
from tabulae.http.options import FrontendOptions
from tabulae.model.errors import ServiceError
from tabulae.model.mutation import MutationKind
from tabulae.model.policies import CorsRule
from tabulae.table.api import admin, transactions
from tabulae.table.api import handlers as ops
from tabulae.table.api.odata import CONTENT_TYPES, MINIMAL, metadata_level
from tabulae.table.api.operations import Operation, effective_method, resolve_operation
from tabulae.table.api.roles import NEEDS
from tabulae.table.api.routing import Resource, Route, resolve
from tabulae.table.api.sas import SasGrant, verify_sas
from tabulae.table.service import TableService

_READ_METHODS = {"GET", "HEAD", "OPTIONS"}
# XML errors of the Table service's own that Azure writes as ``m:error`` (recorded: a table ACL on
# a missing table; ``restype=service`` on a path under a table; Get Service Stats on the primary;
# Set Service Properties with a retention of 366 days, InvalidXmlDocument, in the Go SDK's
# go/sdk/data/aztables/testdata/recordings/TestRetentionTooLong.json).
# Front-end errors (authentication, headers) keep the generic ``<Error>`` with its detail elements.
_METADATA_XML_ERRORS = frozenset({"TableNotFound", "InvalidQueryParameterValue", "InvalidXmlDocument"})

Handler = Callable[[ops.TableCall], Awaitable[Response]]

HANDLERS: dict[Operation, Handler] = {
    Operation.QUERY_TABLES: ops.query_tables,
    Operation.CREATE_TABLE: ops.create_table,
    Operation.GET_TABLE: ops.get_table,
    Operation.DELETE_TABLE: ops.delete_table,
    Operation.QUERY_ENTITIES: ops.query_entities,
    Operation.INSERT_ENTITY: ops.insert_entity,
    Operation.GET_ENTITY: ops.get_entity,
    Operation.UPDATE_ENTITY: lambda call: ops.replace_or_merge(call, MutationKind.REPLACE),
    Operation.UPSERT_REPLACE: lambda call: ops.replace_or_merge(call, MutationKind.REPLACE),
    Operation.MERGE_ENTITY: lambda call: ops.replace_or_merge(call, MutationKind.MERGE),
    Operation.UPSERT_MERGE: lambda call: ops.replace_or_merge(call, MutationKind.MERGE),
    Operation.DELETE_ENTITY: ops.delete_entity,
    Operation.GET_ACL: admin.get_acl,
    Operation.SET_ACL: admin.set_acl,
    Operation.GET_SERVICE_PROPERTIES: admin.get_service_properties,
    Operation.SET_SERVICE_PROPERTIES: admin.set_service_properties,
    Operation.GET_SERVICE_STATS: admin.get_service_stats,
}


def _batch_authorizer(grant: SasGrant) -> transactions.Authorizer:
    """Check each operation of a batch against the SAS, with the keys it writes."""

    def authorize(route: Route, operation: Operation, pk: str, rk: str) -> None:
        if grant.table is not None and (route.table or "").lower() != grant.table.lower():
            raise ServiceError("AuthorizationResourceTypeMismatch")  # a table SAS reaches its table only
        grant.check(operation, pk=pk, rk=rk)

    return authorize


def _role_authorizer(actions: frozenset[str]) -> transactions.Authorizer:
    """Check each operation of a batch against a bearer token's role actions ("Performing
    Entity Group Transactions": each sub-operation is authorised on its own)."""

    def authorize(route: Route, operation: Operation, pk: str, rk: str) -> None:
        require(actions, NEEDS.get(operation))

    return authorize


class TableApp(Frontend[Route]):
    """The ASGI callable of the Table port, over a :class:`TableService` (guarded or not).

    The life of a request is :class:`Frontend`'s; errors are JSON for the OData operations and
    XML for the service-level and ``comp`` ones (and for preflights)."""

    service_name = "table"
    exposed_headers = ops.EXPOSED_HEADERS

    def __init__(self, service: TableService, options: FrontendOptions) -> None:
        super().__init__(options)
        self.service = service

    def route(self, request: Request) -> Route:
        host = request.headers.get("host", "127.0.0.1")
        return resolve(request.scheme, host, request.raw_path, self.options.accounts)

    async def verify_sas(
        self, request: Request, route: Route, token: SasToken, keys: list[bytes]
    ) -> SasGrant:
        policies: dict[str, StoredPolicy] = {}
        if token.si is not None and token.tn and not token.is_account:
            try:
                identifiers = await self.service.get_acl(route.account, token.tn)
            except ServiceError:
                identifiers = []
            policies = stored_policies(identifiers)
        return verify_sas(
            token,
            account=route.account,
            keys=keys,
            table=route.table,
            policy_lookup=policies.get,
            is_https=request.scheme == "https",
            client_ip=request.client_ip,
            now=datetime.now(UTC),
        )

    def verify_shared_key(self, request: Request, route: Route, header: str, keys: list[bytes]) -> None:
        """The Table service's own string-to-sign (Shared Key and Shared Key Lite)."""
        headers = request.headers
        verify_authorization(
            header,
            method=request.method,
            raw_path=request.raw_path,
            comp=request.query.get("comp"),
            content_md5=headers.get("content-md5", ""),
            content_type=headers.get("content-type", ""),
            x_ms_date=headers.get("x-ms-date"),
            date=headers.get("date"),
            account=route.account,
            keys=keys,
            max_skew_seconds=self.options.clock_skew,
        )

    def frees_space(self, request: Request, route: Route) -> bool:
        """While the volume is full: reads and deletes, also tunnelled; a batch of deletes only
        (``transactions.submit`` checks its parts)."""
        if route.resource is Resource.BATCH:
            return True
        try:
            return effective_method(request.method, request.x_http_methods) in _READ_METHODS | {"DELETE"}
        except ServiceError:
            return True  # dispatch refuses it as it would anyway

    async def dispatch(self, request: Request, route: Route, request_id: str) -> Response:
        method = effective_method(request.method, request.x_http_methods)
        if route.secondary and method not in _READ_METHODS:
            raise ServiceError("InsufficientAccountPermissions")
        query = request.query
        resource = route.resource
        operation = resolve_operation(
            resource,
            method,
            comp=query.get("comp"),
            restype=query.get("restype") if resource is Resource.SERVICE else None,
            conditional="if-match" in request.headers,
        )
        request.operation = operation
        if operation is Operation.GET_SERVICE_STATS and not route.secondary:
            raise ServiceError("InvalidQueryParameterValue")  # stats exist on the secondary endpoint only
        grant: SasGrant | None = request.grant
        actions = request.actions  # a bearer token's role actions, when roles are enforced
        if operation is Operation.BATCH:
            authorize = (
                _batch_authorizer(grant)
                if grant is not None
                else (_role_authorizer(actions) if actions is not None else None)
            )
            volume = self.options.volume
            return await transactions.submit(
                self.service,
                request,
                route,
                request_id,
                self.options.accounts,
                authorize,
                deletes_only=volume is not None and volume.full,
            )
        if grant is not None:
            grant.check(operation, pk=route.pk, rk=route.rk)
        elif actions is not None:
            require(actions, NEEDS.get(operation))
        if route.resource is Resource.NESTED:
            return await ops.nested(Call(self.service, request, route), operation)
        response = await HANDLERS[operation](Call(self.service, request, route))
        if operation is Operation.SET_SERVICE_PROPERTIES:
            self.forget_cors_rules(route.account)
        return response

    async def load_cors_rules(self, account: str) -> list[CorsRule]:
        return (await self.service.get_service_properties(account)).cors

    def error_response(
        self, request: Request, route: Route | None, error: ServiceError, request_id: str
    ) -> Response:
        headers = [(b"x-ms-error-code", error.code.encode())]
        if error.headers:
            headers.extend(error.headers)
        if _xml_errors(request, route):
            body = error_xml(error, request_id, error_time(), table_style=error.code in _METADATA_XML_ERRORS)
            headers.append((b"content-type", XML_CONTENT_TYPE))
        else:
            try:
                level = metadata_level(request.headers.get("accept"), request.query.get("$format"))
            except ServiceError:
                level = MINIMAL
            body = error_json(error, request_id, error_time())
            headers.append((b"content-type", CONTENT_TYPES[level]))
            headers.append(NOSNIFF)  # as Azure's OData errors carry it (recorded: 403, 404)
        headers.append((b"cache-control", b"no-cache"))
        return Response(error.status, headers, body)


def _xml_errors(request: Request, route: Route | None) -> bool:
    """XML for preflights and the service-level and ``comp`` operations, JSON for OData ones."""
    if request.method == "OPTIONS":
        return route is not None
    if route is None:
        return False
    try:
        return route.resource is Resource.SERVICE or "comp" in request.query
    except ServiceError:
        return False
