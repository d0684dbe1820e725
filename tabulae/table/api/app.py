"""The Table service's front-end: an ASGI app for the Table port.

One request goes: ASGI scope → :class:`Request` → route (account and resource) → authentication
→ the operation, resolved once (:mod:`.operations`) → the SAS check for that operation → its
handler from :data:`HANDLERS` → :class:`Response` with the headers every Azure response carries.
A ``TableError`` raised anywhere below becomes the Azure error body here, and only here: JSON
for the OData operations, XML for the service-level and ``comp`` ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from tabulae.auth.bearer import CHALLENGE, verify_bearer
from tabulae.auth.sas import StoredPolicy, parse_sas
from tabulae.auth.shared_key import verify_authorization
from tabulae.http import cors
from tabulae.http.errors import XML_CONTENT_TYPE, error_json, error_xml
from tabulae.http.exchange import log_request, read_body, send_response
from tabulae.http.messages import Clock, Request, RequestIds, Response, error_time
from tabulae.http.options import FrontendOptions
from tabulae.http.versions import check_version
from tabulae.model.errors import TableError
from tabulae.model.mutation import MutationKind
from tabulae.model.policies import CorsRule
from tabulae.table.api import admin, transactions
from tabulae.table.api import handlers as ops
from tabulae.table.api.odata import CONTENT_TYPES, MINIMAL, metadata_level
from tabulae.table.api.operations import Operation, effective_method, resolve_operation
from tabulae.table.api.routing import Resource, Route, resolve
from tabulae.table.api.sas import SasGrant, verify_sas
from tabulae.table.service import TableService

log = logging.getLogger("tabulae")

_READ_METHODS = {"GET", "HEAD", "OPTIONS"}
# XML errors of the Table service's own that Azure writes as ``m:error`` (recorded: a table ACL on
# a missing table; ``restype=service`` on a path under a table; Get Service Stats on the primary).
# Front-end errors (authentication, headers) keep the generic ``<Error>`` with its detail elements.
_METADATA_XML_ERRORS = frozenset({"TableNotFound", "InvalidQueryParameterValue"})

Handler = Callable[[TableService, Request, Route], Awaitable[Response]]

HANDLERS: dict[Operation, Handler] = {
    Operation.QUERY_TABLES: ops.query_tables,
    Operation.CREATE_TABLE: ops.create_table,
    Operation.GET_TABLE: ops.get_table,
    Operation.DELETE_TABLE: ops.delete_table,
    Operation.QUERY_ENTITIES: ops.query_entities,
    Operation.INSERT_ENTITY: ops.insert_entity,
    Operation.GET_ENTITY: ops.get_entity,
    Operation.UPDATE_ENTITY: lambda s, r, t: ops.replace_or_merge(s, r, t, MutationKind.REPLACE),
    Operation.UPSERT_REPLACE: lambda s, r, t: ops.replace_or_merge(s, r, t, MutationKind.REPLACE),
    Operation.MERGE_ENTITY: lambda s, r, t: ops.replace_or_merge(s, r, t, MutationKind.MERGE),
    Operation.UPSERT_MERGE: lambda s, r, t: ops.replace_or_merge(s, r, t, MutationKind.MERGE),
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
            raise TableError("AuthorizationResourceTypeMismatch")  # a table SAS reaches its table only
        grant.check(operation, pk=pk, rk=rk)

    return authorize


class TableApp:
    """The ASGI callable of the Table port, over a :class:`TableService` (guarded or not)."""

    def __init__(self, service: TableService, options: FrontendOptions) -> None:
        self.service = service
        self.options = options
        self._ids = RequestIds()
        self._clock = Clock()
        self._cors_rules = cors.RulesCache(self._load_cors_rules)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.perf_counter()
        request = Request.from_scope(scope)
        request_id = self._ids.next()
        xml_errors = False
        route: Route | None = None
        try:
            route = self._route(request)
            xml_errors = route.resource is Resource.SERVICE or "comp" in request.query
            if request.method == "OPTIONS":
                xml_errors = True
                response = await self._preflight(request, route)
            else:
                check_version(request.headers.get("x-ms-version"))
                await read_body(request, receive, self.options.max_body_bytes, self.options.body_timeout)
                await self._authenticate(request, route)
                response = await self._dispatch(request, route, request_id)
        except TableError as error:
            response = self._error_response(request, error, request_id, xml_errors)
        except Exception:
            log.exception("unexpected error handling %s request", request.method)
            response = self._error_response(request, TableError("InternalError"), request_id, xml_errors)
        if route is not None and request.method != "OPTIONS":
            cors_headers = self._cached_cors_headers(route, request)
            if cors_headers is None:
                cors_headers = await self._cors_headers(route, request)
            response.headers.extend(cors_headers)
        await send_response(send, request, response, request_id, self._clock)
        if self.options.access_log:
            log_request(request, response.status, request_id, started)

    def _route(self, request: Request) -> Route:
        host = request.headers.get("host", "127.0.0.1")
        return resolve(request.scheme, host, request.raw_path, self.options.accounts)

    async def _authenticate(self, request: Request, route: Route) -> None:
        """Shared Key, Shared Key Lite, bearer (when enabled) or SAS; anonymous requests get 401."""
        keys = self.options.accounts[route.account]
        header = request.headers.get("authorization")
        if header is not None:
            if header.strip()[:7].lower() == "bearer ":
                if not self.options.oauth:
                    raise TableError("InvalidAuthenticationInfo")
                verify_bearer(header, route.account)
                return
            verify_authorization(
                header,
                method=request.method,
                raw_path=request.raw_path,
                comp=request.query.get("comp"),
                content_md5=request.headers.get("content-md5", ""),
                content_type=request.headers.get("content-type", ""),
                x_ms_date=request.headers.get("x-ms-date"),
                date=request.headers.get("date"),
                account=route.account,
                keys=keys,
                max_skew_seconds=self.options.clock_skew,
            )
            return
        token = parse_sas(request.query)
        if token is None:
            raise TableError("NoAuthenticationInformation", headers=[(b"www-authenticate", CHALLENGE)])
        policies: dict[str, StoredPolicy] = {}
        if token.si is not None and token.tn and not token.is_account:
            try:
                identifiers = await self.service.get_acl(route.account, token.tn)
            except TableError:
                identifiers = []
            policies = {
                i.id: StoredPolicy(i.start, i.expiry, i.permission) for i in identifiers if i.policy_given
            }
        request.grant = verify_sas(
            token,
            account=route.account,
            keys=keys,
            table=route.table,
            policy_lookup=policies.get,
            is_https=request.scheme == "https",
            client_ip=request.client_ip,
            now=datetime.now(UTC),
        )

    async def _dispatch(self, request: Request, route: Route, request_id: str) -> Response:
        method = effective_method(request.method, request.x_http_methods)
        if route.secondary and method not in _READ_METHODS:
            raise TableError("AuthorizationFailure")
        query = request.query
        resource = route.resource
        operation = resolve_operation(
            resource,
            method,
            comp=query.get("comp"),
            restype=query.get("restype") if resource is Resource.SERVICE else None,
            conditional="if-match" in request.headers,
        )
        if operation is Operation.GET_SERVICE_STATS and not route.secondary:
            raise TableError("InvalidQueryParameterValue")  # stats exist on the secondary endpoint only
        grant: SasGrant | None = request.grant
        if operation is Operation.BATCH:
            authorize = _batch_authorizer(grant) if grant is not None else None
            return await transactions.submit(
                self.service, request, route, request_id, self.options.accounts, authorize
            )
        if grant is not None:
            grant.check(operation, pk=route.pk, rk=route.rk)
        if route.resource is Resource.NESTED:
            return await ops.nested(self.service, request, route, operation)
        response = await HANDLERS[operation](self.service, request, route)
        if operation is Operation.SET_SERVICE_PROPERTIES:
            self._cors_rules.forget(route.account)
        return response

    async def _preflight(self, request: Request, route: Route) -> Response:
        properties = await self.service.get_service_properties(route.account)
        return cors.preflight(properties.cors, request.headers)

    def _cached_cors_headers(self, route: Route, request: Request) -> list[tuple[bytes, bytes]] | None:
        """The CORS headers of an actual request when they need no read ("CORS support for the
        Azure Storage services"): none for a request without ``Origin`` other than GET or HEAD,
        and for a GET or HEAD without one (where only ``Vary``, or a ``*`` rule's headers, can
        apply), from the rules cached in the last second, so point reads do not read service
        properties. None when the rules must be read (:meth:`_cors_headers`)."""
        if "origin" in request.headers:
            return None
        if request.method not in cors.VARYING_METHODS:
            return []
        rules = self._cors_rules.peek(route.account)
        if rules is None:
            return None
        return cors.actual_headers(rules, None, request.method, ops.EXPOSED_HEADERS) if rules else []

    async def _cors_headers(self, route: Route, request: Request) -> list[tuple[bytes, bytes]]:
        """The CORS headers of an actual request, reading the rules: every time for a request with
        ``Origin`` (a rule change applies at once), through the cache for one without."""
        origin = request.headers.get("origin")
        try:
            if origin:
                rules = (await self.service.get_service_properties(route.account)).cors
            else:
                rules = await self._cors_rules.get(route.account)
        except TableError:
            return []
        return cors.actual_headers(rules, origin or None, request.method, ops.EXPOSED_HEADERS)

    async def _load_cors_rules(self, account: str) -> list[CorsRule]:
        return (await self.service.get_service_properties(account)).cors

    def _error_response(self, request: Request, error: TableError, request_id: str, xml: bool) -> Response:
        headers = [(b"x-ms-error-code", error.code.encode())]
        if error.headers:
            headers.extend(error.headers)
        if xml:
            body = error_xml(error, request_id, error_time(), table_style=error.code in _METADATA_XML_ERRORS)
            headers.append((b"content-type", XML_CONTENT_TYPE))
        else:
            try:
                level = metadata_level(request.headers.get("accept"), request.query.get("$format"))
            except TableError:
                level = MINIMAL
            body = error_json(error, request_id, error_time())
            headers.append((b"content-type", CONTENT_TYPES[level]))
        headers.append((b"cache-control", b"no-cache"))
        return Response(error.status, headers, body)
