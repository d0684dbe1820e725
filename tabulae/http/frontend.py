"""The life of a request in every service's front-end, written once.

ASGI scope → :class:`Request` → the service's route (account and resource) → for ``OPTIONS`` the
CORS preflight, otherwise the body, authentication and the service's dispatch → the
:class:`Response` with the headers every Azure response carries, CORS headers on actual requests
that name an ``Origin``, and the access-log line. A ``TableError`` raised anywhere below becomes
the service's error body here, and only here; anything else is logged and answered 500
``InternalError``.

A service's front-end (``table.api.app.TableApp``, ``queue.api.app.QueueApp``) subclasses
:class:`Frontend` and supplies the steps that differ: how a URL is routed, how requests are
authenticated and dispatched, the CORS rules of the account, and the error format. The body is
read whole under ``max_body_bytes`` unless the service reads it another way.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from tabulae.http import cors
from tabulae.http.exchange import log_request, read_body, send_response
from tabulae.http.messages import SERVER_HEADER, Clock, Headers, Request, RequestIds, Response
from tabulae.http.options import FrontendOptions
from tabulae.model.errors import TableError
from tabulae.model.policies import CorsRule

log = logging.getLogger("tabulae")

RouteT = TypeVar("RouteT")


class Frontend(ABC, Generic[RouteT]):
    """The ASGI callable of one service's port. ``RouteT`` is what the service's router returns."""

    server_header: tuple[bytes, bytes] = SERVER_HEADER
    exposed_headers = ""  # response headers exposed to CORS callers besides a rule's own list

    def __init__(self, options: FrontendOptions) -> None:
        self.options = options
        self._ids = RequestIds()
        self._clock = Clock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.perf_counter()
        request = Request.from_scope(scope)
        request_id = self._ids.next()
        route: RouteT | None = None
        try:
            route = self.route(request)
            if request.method == "OPTIONS":
                response = cors.preflight(await self.cors_rules(route), request.headers)
            else:
                await self.receive_body(request, receive, route)
                await self.authenticate(request, route)
                response = await self.dispatch(request, route, request_id)
        except TableError as error:
            response = self.error_response(request, route, error, request_id)
        except Exception:
            log.exception("unexpected error handling %s request", request.method)
            response = self.error_response(request, route, TableError("InternalError"), request_id)
        origin = request.headers.get("origin")
        if origin and route is not None and request.method != "OPTIONS":
            response.headers.extend(await self._cors_headers(route, origin, request.method))
        await send_response(send, request, response, request_id, self._clock, self.server_header)
        if self.options.access_log:
            log_request(request, response.status, request_id, started)

    async def _cors_headers(self, route: RouteT, origin: str, method: str) -> Headers:
        try:
            rules = await self.cors_rules(route)
        except TableError:
            return []
        return cors.actual_headers(rules, origin, method, self.exposed_headers)

    async def receive_body(self, request: Request, receive: Any, route: RouteT) -> None:
        """Read the whole body into ``request.body`` (413 past ``max_body_bytes``)."""
        await read_body(request, receive, self.options.max_body_bytes, self.options.body_timeout)

    @abstractmethod
    def route(self, request: Request) -> RouteT:
        """The account and resource the request addresses; raises for a URL the service lacks."""

    @abstractmethod
    async def authenticate(self, request: Request, route: RouteT) -> None:
        """Check who sent the request (``auth.flow.authenticate``); a SAS grant goes to ``request.grant``."""

    @abstractmethod
    async def dispatch(self, request: Request, route: RouteT, request_id: str) -> Response:
        """Resolve the operation, check a SAS grant for it, and run its handler."""

    @abstractmethod
    async def cors_rules(self, route: RouteT) -> list[CorsRule]:
        """The CORS rules of the addressed account's service."""

    @abstractmethod
    def error_response(
        self, request: Request, route: RouteT | None, error: TableError, request_id: str
    ) -> Response:
        """The error as the service writes it (``route`` is None when routing itself failed)."""
