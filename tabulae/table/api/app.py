"""The ASGI application: the front-end of the service.

One request goes: ASGI scope → :class:`Request` → route (account and resource) → authentication
→ the operation's handler → :class:`Response` with the headers every Azure response carries.
A ``TableError`` raised anywhere below becomes the Azure error body here, and only here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from tabulae.admission.faults import FaultInjector
from tabulae.admission.guard import GuardedService
from tabulae.admission.throttle import Targets, Throttle
from tabulae.auth.bearer import CHALLENGE, verify_bearer
from tabulae.auth.sas import Operation, SasGrant, StoredPolicy, parse_sas, verify_sas
from tabulae.auth.shared_key import verify_authorization
from tabulae.config import SETTINGS_ENV, Settings
from tabulae.http import cors
from tabulae.http.errors import XML_CONTENT_TYPE, error_json, error_xml
from tabulae.http.messages import SERVER_HEADER, Clock, Request, RequestIds, Response, error_time
from tabulae.insight.partitions import Insight
from tabulae.model.errors import TableError
from tabulae.model.policies import decode_acl
from tabulae.storage.factory import open_store
from tabulae.storage.tables import MutationKind, Store
from tabulae.table.api import admin, transactions
from tabulae.table.api import handlers as ops
from tabulae.table.api.odata import CONTENT_TYPES, MINIMAL, metadata_level
from tabulae.table.api.routing import Resource, Route, resolve
from tabulae.table.service import TableService

log = logging.getLogger("tabulae")

DEFAULT_VERSION = "2019-02-02"
_TUNNELLED = {"MERGE", "DELETE", "PUT", "PATCH"}
_READ_METHODS = {"GET", "HEAD", "OPTIONS"}

Handler = Callable[[TableService, Request, Route], Awaitable[Response]]


def _effective_method(request: Request) -> str:
    """Apply ``X-HTTP-Method`` tunnelling (POST only, once, a known verb)."""
    if request.x_http_method_count == 0:
        return request.method
    if request.method != "POST":
        raise TableError("XMethodNotUsingPost")
    if request.x_http_method_count > 1:
        raise TableError("XMethodIncorrectCount")
    value = request.headers["x-http-method"].strip().upper()
    if value not in _TUNNELLED:
        raise TableError("XMethodIncorrectValue")
    return value


def _entity_handler(method: str) -> Handler | None:
    if method == "GET":
        return ops.get_entity
    if method == "PUT":
        return lambda s, r, t: ops.replace_or_merge(s, r, t, MutationKind.REPLACE)
    if method in ("MERGE", "PATCH"):
        return lambda s, r, t: ops.replace_or_merge(s, r, t, MutationKind.MERGE)
    if method == "DELETE":
        return ops.delete_entity
    return None


def _handler(route: Route, method: str, comp: str | None) -> Handler:
    resource = route.resource
    handler: Handler | None = None
    if resource is Resource.TABLES:
        handler = {"GET": ops.query_tables, "POST": ops.create_table}.get(method)
    elif resource is Resource.TABLE:
        handler = {"GET": ops.get_table, "DELETE": ops.delete_table}.get(method)
    elif resource is Resource.ENTITIES and comp is None:
        handler = {"GET": ops.query_entities, "POST": ops.insert_entity}.get(method)
    elif resource is Resource.ENTITY:
        handler = _entity_handler(method)
    if handler is None:
        raise TableError("MethodNotAllowed")
    return handler


def _batch_authorizer(grant: SasGrant, request: Request) -> transactions.Authorizer:
    """Check each operation of a batch against the SAS, with the keys it writes."""

    def authorize(route: Route, method: str, pk: str, rk: str, conditional: bool) -> None:
        if grant.table is not None and (route.table or "").lower() != grant.table.lower():
            raise TableError("AuthorizationResourceTypeMismatch")  # a table SAS reaches its table only
        if method == "POST":
            operation = Operation.INSERT_ENTITY
        elif method == "PUT":
            operation = Operation.UPDATE_ENTITY if conditional else Operation.UPSERT_REPLACE
        elif method in ("MERGE", "PATCH"):
            operation = Operation.MERGE_ENTITY if conditional else Operation.UPSERT_MERGE
        elif method == "DELETE":
            operation = Operation.DELETE_ENTITY
        else:
            operation = Operation.GET_ENTITY
        grant.check(operation, pk=pk, rk=rk)

    return authorize


def operation_for(route: Route, method: str, request: Request) -> Operation:
    """The operation a request performs, as authorization rules name it."""
    resource = route.resource
    comp = request.query.get("comp")
    if resource is Resource.SERVICE:
        if comp == "stats":
            return Operation.GET_SERVICE_STATS
        return Operation.SET_SERVICE_PROPERTIES if method == "PUT" else Operation.GET_SERVICE_PROPERTIES
    if resource is Resource.TABLES:
        return Operation.CREATE_TABLE if method == "POST" else Operation.QUERY_TABLES
    if resource is Resource.TABLE:
        return Operation.DELETE_TABLE if method == "DELETE" else Operation.GET_TABLE
    if resource is Resource.ENTITIES:
        if comp == "acl":
            return Operation.SET_ACL if method == "PUT" else Operation.GET_ACL
        return Operation.INSERT_ENTITY if method == "POST" else Operation.QUERY_ENTITIES
    conditional = "if-match" in request.headers
    if method == "PUT":
        return Operation.UPDATE_ENTITY if conditional else Operation.UPSERT_REPLACE
    if method in ("MERGE", "PATCH"):
        return Operation.MERGE_ENTITY if conditional else Operation.UPSERT_MERGE
    if method == "DELETE":
        return Operation.DELETE_ENTITY
    return Operation.GET_ENTITY


class TabulaeApp:
    """The ASGI callable. The store is opened at lifespan start-up, in the serving process."""

    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self._store = store
        self.insight = Insight(
            partition_target=settings.partition_target, account_target=settings.account_target
        )
        self.service: TableService | None = self._guarded(store) if store else None
        self._ids = RequestIds()
        self._clock = Clock()

    # ------------------------------------------------------------------------- lifecycle

    async def startup(self) -> None:
        if self._store is None:
            settings = self.settings
            self._store = await open_store(settings.store_url, settings.data_dir, settings.in_memory)
            self.service = self._guarded(self._store)

    def _guarded(self, store: Store) -> GuardedService:
        """The service with targets (per worker, a share of each), faults and insight as configured."""
        settings = self.settings
        throttle = None
        if settings.targets:
            targets = Targets(settings.partition_target, settings.account_target)
            throttle = Throttle(targets, workers=settings.workers)
        faults = None
        if settings.faults > 0:
            seed = None if settings.faults_seed is None else settings.faults_seed + os.getpid()
            faults = FaultInjector(settings.faults, random.Random(seed))
        return GuardedService(
            store,
            page_time_budget=settings.page_time_budget,
            insight=self.insight,
            throttle=throttle,
            faults=faults,
        )

    async def shutdown(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:  # reported to uvicorn, which exits
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # ------------------------------------------------------------------------- requests

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        if scope["path"] == "/metrics" and scope["method"] == "GET":
            await self._metrics(scope, send)
            return
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
                await self._read_body(request, receive)
                await self._authenticate(request, route)
                response = await self._dispatch(request, route, request_id)
        except TableError as error:
            response = self._error_response(request, error, request_id, xml_errors)
        except Exception:
            log.exception("unexpected error handling %s request", request.method)
            response = self._error_response(request, TableError("InternalError"), request_id, xml_errors)
        origin = request.headers.get("origin")
        if origin and route is not None and request.method != "OPTIONS":
            response.headers.extend(await self._cors_headers(route, origin, request.method))
        await self._send(send, request, response, request_id)
        if self.settings.access_log:
            self._log_request(request, response, request_id, started)

    @staticmethod
    def _log_request(request: Request, response: Response, request_id: str, started: float) -> None:
        """One JSON line per request. The query string is left out: it may hold a SAS signature."""
        line = {
            "time": error_time(),
            "request_id": request_id,
            "method": request.method,
            "path": request.raw_path,
            "status": response.status,
            "ms": round((time.perf_counter() - started) * 1000, 3),
        }
        sys.stderr.write(orjson.dumps(line).decode() + "\n")

    async def _metrics(self, scope: dict[str, Any], send: Any) -> None:
        """``/metrics``: this worker's counters, Prometheus text or (``?format=json``) JSON.

        Unauthenticated like any Prometheus endpoint; the server listens on loopback by default.
        """
        if b"format=json" in scope["query_string"]:
            body = orjson.dumps(self.insight.snapshot())
            content_type = b"application/json"
        else:
            body = self.insight.prometheus().encode()
            content_type = b"text/plain; version=0.0.4; charset=utf-8"
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _route(self, request: Request) -> Route:
        host = request.headers.get("host", "127.0.0.1")
        return resolve(request.scheme, host, request.raw_path, self.settings.accounts)

    async def _read_body(self, request: Request, receive: Any) -> None:
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is None or declared == "0":
            if "transfer-encoding" not in request.headers:
                return  # HTTP/1.1 framing: no length and no chunking means no body to wait for
        elif declared.isdigit() and int(declared) > limit:
            raise TableError("RequestBodyTooLarge")
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                async with asyncio.timeout(self.settings.body_timeout):  # a timer, not a task
                    message = await receive()
            except TimeoutError:
                raise TableError("OperationTimedOut") from None  # a client too slow with its body
            if message["type"] == "http.disconnect":
                raise TableError("InvalidInput")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise TableError("RequestBodyTooLarge")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        request.body = b"".join(chunks)

    async def _authenticate(self, request: Request, route: Route) -> None:
        """Shared Key, Shared Key Lite, bearer (when enabled) or SAS; anonymous requests get 401."""
        keys = self.settings.accounts[route.account]
        header = request.headers.get("authorization")
        if header is not None:
            if header.strip()[:7].lower() == "bearer ":
                if not self.settings.oauth:
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
            )
            return
        token = parse_sas(request.query)
        if token is None:
            raise TableError("NoAuthenticationInformation", headers=[(b"www-authenticate", CHALLENGE)])
        policies: dict[str, StoredPolicy] = {}
        if token.si is not None and token.tn and not token.is_account and self._store is not None:
            try:
                identifiers = decode_acl(await self._store.get_acl(route.account, token.tn))
            except TableError:
                identifiers = []
            policies = {
                i.id: StoredPolicy(i.start, i.expiry, i.permission) for i in identifiers if i.has_policy
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
        method = _effective_method(request)
        if route.secondary and method not in _READ_METHODS:
            raise TableError("AuthorizationFailure")
        assert self.service is not None
        grant = request.grant
        if route.resource is Resource.BATCH:
            if method != "POST":
                raise TableError("MethodNotAllowed")
            authorize = _batch_authorizer(grant, request) if grant is not None else None
            return await transactions.submit(
                self.service, request, route, request_id, self.settings.accounts, authorize
            )
        if grant is not None:
            grant.check(operation_for(route, method, request), pk=route.pk, rk=route.rk)
        if route.resource is Resource.SERVICE:
            _kind, service_handler = admin.service_handler(method, request)
            return await service_handler(self.service, request, route)  # type: ignore[operator]
        comp = request.query.get("comp")
        if comp == "acl" and route.resource is Resource.ENTITIES:
            acl_handler = {"GET": admin.get_acl, "PUT": admin.set_acl}.get(method)
            if acl_handler is None:
                raise TableError("MethodNotAllowed")
            return await acl_handler(self.service, request, route)
        if comp is not None:
            raise TableError("InvalidQueryParameterValue")
        handler = _handler(route, method, None)
        return await handler(self.service, request, route)

    async def _preflight(self, request: Request, route: Route) -> Response:
        assert self.service is not None
        properties = await self.service.get_service_properties(route.account)
        return cors.preflight(properties.cors, request.headers)

    async def _cors_headers(self, route: Route, origin: str, method: str) -> list[tuple[bytes, bytes]]:
        if self.service is None:
            return []
        try:
            properties = await self.service.get_service_properties(route.account)
        except TableError:
            return []
        return cors.actual_headers(properties.cors, origin, method)

    # ------------------------------------------------------------------------- responses

    def _error_response(self, request: Request, error: TableError, request_id: str, xml: bool) -> Response:
        headers = [(b"x-ms-error-code", error.code.encode())]
        if error.headers:
            headers.extend(error.headers)
        if xml:
            body = error_xml(error, request_id, error_time(), table_style=error.code == "TableNotFound")
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

    async def _send(self, send: Any, request: Request, response: Response, request_id: str) -> None:
        headers = response.headers
        headers.append((b"content-length", str(len(response.body)).encode()))
        headers.append((b"x-ms-request-id", request_id.encode()))
        headers.append(
            (b"x-ms-version", request.headers.get("x-ms-version", DEFAULT_VERSION).encode("latin-1"))
        )
        headers.append((b"date", self._clock.http_date()))
        headers.append(SERVER_HEADER)
        client_id = request.headers.get("x-ms-client-request-id")
        if client_id is not None:
            headers.append((b"x-ms-client-request-id", client_id.encode("latin-1")))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})


def create_app() -> TabulaeApp:
    """Factory used by worker processes of ``tabulae serve --workers N``."""
    from tabulae.http.protocol import AzureHttpProtocol

    settings = Settings.from_json(os.environ[SETTINGS_ENV])
    AzureHttpProtocol.header_timeout = settings.body_timeout  # this worker's own copy of the class
    return TabulaeApp(settings)
