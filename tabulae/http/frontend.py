"""The life of a request in every service's front-end, written once.

ASGI scope → :class:`Request` → the service's route (account and resource) → for ``OPTIONS`` the
CORS preflight, otherwise the ``x-ms-version`` check, the body, authentication and the service's
dispatch → the :class:`Response` with the headers every Azure response carries, the CORS headers
of an actual request, and the access-log line; a ``StreamedResponse`` (blob content) goes out
piece by piece as the client takes it. A ``ServiceError`` raised anywhere below becomes the
service's error body here, and only here; anything else is logged and answered 500
``InternalError``.

A service's front-end (``table.api.app.TableApp``, ``queue.api.app.QueueApp``,
``blob.api.app.BlobApp``) subclasses :class:`Frontend` and supplies the steps that differ: how a
URL is routed, how requests are authenticated and dispatched, where the account's CORS rules are
kept, how its SAS is verified, and the error format. Authentication is wired here once: every
service checks Shared Key, bearer and SAS in the same order, each with its own string-to-sign
and SAS rules. The body is read whole under ``max_body_bytes`` unless the service
reads it another way (the Blob service streams content from its handlers).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from tabulae.auth.flow import authenticate, is_bearer
from tabulae.auth.rbac import token_actions
from tabulae.auth.sas import SasToken, parse_sas
from tabulae.auth.shared_key import verify_blob_queue_authorization
from tabulae.http import cors
from tabulae.http.exchange import log_request, read_body, send_response
from tabulae.http.messages import SERVER_HEADER, Clock, Headers, Request, RequestIds, Response
from tabulae.http.options import FrontendOptions
from tabulae.http.sendfile import SENDFILE
from tabulae.http.streaming import StreamedResponse, send_streamed
from tabulae.http.versions import check_version, run_at_signed_version
from tabulae.insight.tracing import STORAGE_SECONDS
from tabulae.model.errors import VOLUME_FULL_MESSAGE, ServiceError
from tabulae.model.policies import CorsRule

log = logging.getLogger("tabulae")
_RUNS_WHILE_FULL = frozenset({"GET", "HEAD", "DELETE"})


class Routed(Protocol):
    """What every service's route has: the account it addresses."""

    account: str


RouteT = TypeVar("RouteT", bound=Routed)
ServiceT = TypeVar("ServiceT")


@dataclass(slots=True)
class Call(Generic[ServiceT, RouteT]):
    """One request as its handler sees it, the same shape in every service: the service it
    calls, the parsed request and the route it addressed (a service may add what its handlers
    need besides, as the Blob service adds the body stream). Every handler takes one."""

    service: ServiceT
    request: Request
    route: RouteT


class Frontend(ABC, Generic[RouteT]):
    """The ASGI callable of one service's port. ``RouteT`` is what the service's router returns."""

    server_header: tuple[bytes, bytes] = SERVER_HEADER
    service_name = ""  # "table", "queue" or "blob": whom a bearer token must be for
    exposed_headers = ""  # response headers exposed to CORS callers besides a rule's own list

    def __init__(self, options: FrontendOptions) -> None:
        self.options = options
        self._ids = RequestIds()
        self._clock = Clock()
        if options.default_cors:  # `--config`'s rules for accounts that have set none
            own_rules = self.load_cors_rules

            async def rules_or_defaults(account: str) -> list[CorsRule]:
                return (await own_rules(account)) or list(options.default_cors)

            self.load_cors_rules = rules_or_defaults  # type: ignore[method-assign]
        self._cors_rules = cors.RulesCache(self.load_cors_rules)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.perf_counter()
        tracer = self.options.tracer
        if tracer is not None:
            started_ns = time.time_ns()
            spent = [0.0]
            STORAGE_SECONDS.set(spent)
        request = Request.from_scope(scope)
        request_id = self._ids.next()
        route, response = await self.respond(request, receive, request_id)
        if route is not None and request.method != "OPTIONS":
            cors_headers = self._cached_cors_headers(route, request, response.headers)
            if cors_headers is None:
                cors_headers = await self._cors_headers(route, request, response.headers)
            response.headers.extend(cors_headers)
        if isinstance(response, StreamedResponse):
            try:
                await send_streamed(
                    send, receive, request, response, request_id, self._clock, self.server_header,
                    scope.get("extensions", {}).get(SENDFILE),
                )  # fmt: skip
            except ServiceError as error:  # the content failed after its headers went out
                log.warning("response ended early: %s", error.detail or error.message)
                return
        else:
            await send_response(send, request, response, request_id, self._clock, self.server_header)
        if route is not None:
            self.answered(request, route, response)
        if self.options.access_log:
            log_request(request, response.status, request_id, started)
        if tracer is not None:
            tracer.record(
                service=self.service_name,
                operation=request.operation,
                account=route.account if route is not None else None,
                method=request.method,
                status=response.status,
                start_ns=started_ns,
                end_ns=time.time_ns(),
                storage_seconds=spent[0],
            )

    async def respond(
        self, request: Request, receive: Any, request_id: str
    ) -> tuple[RouteT | None, Response]:
        """The route and the response of one request: route, preflight or version check, body,
        authentication, dispatch, and any error as the service writes it. A batch runs each of
        its sub-requests through here too, so every rule of a request is written once."""
        route: RouteT | None = None
        try:
            route = self.route(request)
            if request.method == "OPTIONS":
                rules = await self.load_cors_rules(route.account)
                response = cors.preflight(rules, request.headers)
            else:
                if not self.options.skip_version_check:
                    check_version(request.headers.get("x-ms-version"))
                await self.receive_body(request, receive, route)
                await self.authenticate(request, route)
                volume = self.options.volume
                if (
                    volume is not None
                    and volume.full
                    and not self.frees_space(request, route)
                    and volume.still_full()  # looked at again: the first write after room is back runs
                ):
                    raise ServiceError("ServerBusy", VOLUME_FULL_MESSAGE)
                response = await self.dispatch(request, route, request_id)
        except ServiceError as error:
            response = self.error_response(request, route, error, request_id)
        except Exception:
            log.exception("unexpected error handling %s request", request.method)
            response = self.error_response(request, route, ServiceError("InternalError"), request_id)
        return route, response

    # ------------------------------------------------------------------------------ CORS

    def _cached_cors_headers(self, route: RouteT, request: Request, answer: Headers) -> Headers | None:
        """The CORS headers of an actual request when they need no read ("CORS support for the
        Azure Storage services"): none for a request without ``Origin`` other than GET or HEAD,
        and for a GET or HEAD without one (where only ``Vary``, or a ``*`` rule's headers, can
        apply), from the rules cached in the last second, so reads do not read service
        properties. None when the rules must be read (:meth:`_cors_headers`)."""
        if "origin" in request.headers:
            return None
        if request.method not in cors.VARYING_METHODS:
            return []
        rules = self._cors_rules.peek(route.account)
        if rules is None:
            return None
        return cors.actual_headers(rules, None, request.method, self.exposed_headers, answer) if rules else []

    async def _cors_headers(self, route: RouteT, request: Request, answer: Headers) -> Headers:
        """The CORS headers of an actual request, reading the rules: every time for a request with
        ``Origin`` (a rule change applies at once), through the cache for one without."""
        origin = request.headers.get("origin")
        try:
            if origin:
                rules = await self.load_cors_rules(route.account)
            else:
                rules = await self._cors_rules.get(route.account)
        except ServiceError:
            return []
        return cors.actual_headers(rules, origin or None, request.method, self.exposed_headers, answer)

    def forget_cors_rules(self, account: str) -> None:
        """Drop the cached rules of an account whose service properties this worker just set."""
        self._cors_rules.forget(account)

    # ------------------------------------------------------------------------------ the steps

    def frees_space(self, request: Request, route: RouteT) -> bool:
        """Whether a request may run while the data volume is full: reads, and deletes (which
        make room; Get Messages too, so that a queue can be drained). A service whose writes go
        by other methods says so."""
        return request.method in _RUNS_WHILE_FULL

    async def receive_body(self, request: Request, receive: Any, route: RouteT) -> None:
        """Read the whole body into ``request.body`` (413 past ``max_body_bytes``)."""
        await read_body(request, receive, self.options.max_body_bytes, self.options.body_timeout)

    def answered(self, request: Request, route: RouteT, response: Response) -> None:
        """Called once the response has gone out (a service counting what it served)."""

    @abstractmethod
    def route(self, request: Request) -> RouteT:
        """The account and resource the request addresses; raises for a URL the service lacks."""

    async def authenticate(self, request: Request, route: RouteT) -> None:
        """Check who sent the request, in ``auth.flow``'s order: Shared Key or Shared Key Lite,
        bearer (when enabled) or SAS; anonymous requests get 401. A SAS grant goes to
        ``request.grant`` (None: the account's full rights, or a token's: with role assignments
        configured, the actions its roles grant go to ``request.actions`` for the service to
        check against the operation). A Shared Key header, on nearly
        every request, is verified here directly rather than through flow's coroutine; the
        order of the checks is the same."""
        keys = self.options.accounts[route.account]
        header = request.headers.get("authorization")
        if header is not None and not is_bearer(header):
            self.verify_shared_key(request, route, header, keys)
            request.grant = None
            return
        request.grant = await authenticate(
            header,
            request.query,
            account=route.account,
            service=self.service_name,
            oauth=self.options.oauth,
            shared_key=lambda signed: self.verify_shared_key(request, route, signed, keys),
            sas=lambda token: self.verify_sas(request, route, token, keys),
        )
        if header is None:  # a verified SAS
            token = parse_sas(request.query)
            run_at_signed_version(request.headers, token.sv if token is not None else None)
        if header is not None and self.options.roles:  # a verified token, and roles to hold it to
            request.actions = token_actions(self.options.roles, header)

    def verify_shared_key(self, request: Request, route: RouteT, header: str, keys: list[bytes]) -> None:
        """Verify a Shared Key (Lite) header; the Blob and Queue services' string-to-sign unless
        the service signs another (the Table service does)."""
        verify_blob_queue_authorization(
            header,
            method=request.method,
            raw_path=request.raw_path,
            headers=request.headers,
            query_pairs=request.query_pairs,
            account=route.account,
            keys=keys,
            max_skew_seconds=self.options.clock_skew,
        )

    @abstractmethod
    async def verify_sas(self, request: Request, route: RouteT, token: SasToken, keys: list[bytes]) -> Any:
        """Verify a SAS against the service's own rules (and its stored policies); return its grant."""

    @abstractmethod
    async def dispatch(self, request: Request, route: RouteT, request_id: str) -> Response:
        """Resolve the operation, check a SAS grant for it, and run its handler."""

    @abstractmethod
    async def load_cors_rules(self, account: str) -> list[CorsRule]:
        """The CORS rules of the account's service, read from its service properties."""

    @abstractmethod
    def error_response(
        self, request: Request, route: RouteT | None, error: ServiceError, request_id: str
    ) -> Response:
        """The error as the service writes it (``route`` is None when routing itself failed)."""
