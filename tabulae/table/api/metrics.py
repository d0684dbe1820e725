"""``GET /metrics``: who may read it, and the answer.

The counters name customers' data (PartitionKeys, table, queue and container names), so they
are only for those who may see it: on a server that listens on loopback only, anyone on the
host (local tools and a Prometheus beside the server work unchanged), as long as the request names
the server by a loopback name (``Host: localhost``, ``127.0.0.1``, ``[::1]``): a web page whose own
name an attacker pointed at 127.0.0.1 (DNS rebinding) reaches the port as well, but says its own
name, and so needs what any other client needs; otherwise a request signed
with an account's key (Shared Key or Shared Key Lite, signed as a Table request for the resource
``/{account}/metrics``, as ``tabulae top`` and the examples sign it) or carrying
``Authorization: Bearer <--metrics-token>`` (compared in constant time). Anything else gets 403
``AuthenticationFailed`` in the Table service's JSON error format; a malformed Shared Key header
400 ``InvalidAuthenticationInfo``, as on every other resource.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tabulae.auth.shared_key import parse_authorization, verify_authorization
from tabulae.http.errors import error_json
from tabulae.http.hosts import is_loopback_name, scope_host
from tabulae.http.messages import error_time
from tabulae.model.errors import ServiceError

__all__ = ["MetricsEndpoint"]

Render = Callable[[bool], Awaitable[tuple[bytes, bytes]]]  # as JSON? -> (content type, body)

_REFUSED = (
    "Server failed to authenticate the request. /metrics needs a request signed with an account key "
    "or the metrics token (--metrics-token) on a server that does not listen on loopback only."
)
_JSON = b"application/json;charset=utf-8"


class MetricsEndpoint:
    """The ASGI app of ``GET /metrics``: the access check, then ``render``'s answer."""

    def __init__(
        self,
        render: Render,
        *,
        accounts: dict[str, list[bytes]],
        open_access: bool,
        token: str | None = None,
        clock_skew: float | None = None,
    ) -> None:
        self._render = render
        self._accounts = accounts
        self.open_access = open_access
        self._token = token.encode() if token else None
        self._clock_skew = clock_skew

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            self.check(scope)
        except ServiceError as error:
            request_id = str(uuid.uuid4())
            body = error_json(error, request_id, error_time())
            headers = [
                (b"x-ms-request-id", request_id.encode()),
                (b"x-ms-error-code", error.code.encode()),
                (b"content-type", _JSON),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": error.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        content_type, body = await self._render(b"format=json" in scope["query_string"])
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def check(self, scope: dict[str, Any]) -> None:
        """Return when the request may read the counters; else raise the error to answer."""
        if self.open_access:
            host = scope_host(scope["headers"])
            if host is not None and is_loopback_name(host):
                return
        headers = {name: value for name, value in scope["headers"] if name in _WANTED}
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        if not authorization:
            raise ServiceError("AuthenticationFailed", _REFUSED)
        if authorization[:7].lower() == "bearer ":
            if self._token is None or not hmac.compare_digest(
                authorization[7:].strip().encode("latin-1"), self._token
            ):
                raise ServiceError("AuthenticationFailed", _REFUSED)
            return
        _scheme, account, _mac = parse_authorization(authorization)
        keys = self._accounts.get(account)
        if keys is None:
            raise ServiceError("AuthenticationFailed", _REFUSED)
        raw_path = scope.get("raw_path") or scope["path"].encode()
        verify_authorization(
            authorization,
            method="GET",
            raw_path=raw_path.decode("latin-1"),
            comp=None,
            content_md5=headers.get(b"content-md5", b"").decode("latin-1"),
            content_type=headers.get(b"content-type", b"").decode("latin-1"),
            x_ms_date=_text(headers.get(b"x-ms-date")),
            date=_text(headers.get(b"date")),
            account=account,
            keys=keys,
            max_skew_seconds=self._clock_skew,
        )


_WANTED = frozenset({b"authorization", b"content-md5", b"content-type", b"x-ms-date", b"date"})


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
