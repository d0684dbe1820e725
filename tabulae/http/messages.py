"""The request and response objects of the front-end: thin, allocation-light views over ASGI."""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl, quote

from tabulae.model.errors import TableError

Headers = list[tuple[bytes, bytes]]

SERVER_HEADER = (b"server", b"Tabulae/0.1 (Windows-Azure-Table/1.0 compatible)")
NO_CACHE = (b"cache-control", b"no-cache")
NOSNIFF = (b"x-content-type-options", b"nosniff")


@dataclass(slots=True)
class Request:
    """What a handler needs of an HTTP request; header names are lower-case."""

    method: str
    raw_path: str
    query_string: str
    headers: dict[str, str]
    scheme: str
    client_ip: str | None
    x_http_methods: tuple[str, ...] = ()  # X-HTTP-Method values, one per header line
    body: bytes = b""
    grant: Any = None  # the SasGrant of a SAS-authorised request
    _query: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def from_scope(cls, scope: dict[str, Any]) -> Request:
        raw_headers = scope["headers"]
        # ASGI servers send header names lower-cased; a repeated name needs the slow path.
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in raw_headers}
        tunnel = headers.get("x-http-method")
        tunnels: tuple[str, ...] = () if tunnel is None else (tunnel,)
        if len(headers) != len(raw_headers):
            headers, tunnels = _combined_headers(raw_headers)
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else quote(scope["path"], safe="/'()=,!$&*+;:@")
        client = scope.get("client")
        return cls(
            method=scope["method"],
            raw_path=path,
            query_string=scope["query_string"].decode("latin-1"),
            headers=headers,
            scheme=scope.get("scheme", "http"),
            client_ip=client[0] if client else None,
            x_http_methods=tunnels,
        )

    @property
    def query(self) -> dict[str, str]:
        """Form-decoded query parameters (``+`` is a space); the first value of a name wins."""
        if self._query is None:
            parsed: dict[str, str] = {}
            if self.query_string:
                try:
                    pairs = parse_qsl(self.query_string, keep_blank_values=True, errors="strict")
                except UnicodeDecodeError as exc:
                    raise TableError("InvalidQueryParameterValue") from exc
                for name, value in pairs:
                    parsed.setdefault(name, value)
            self._query = parsed
        return self._query

    def query_ci(self, name: str) -> str | None:
        """A query parameter matched case-insensitively (continuation tokens, SAS fields)."""
        value = self.query.get(name)
        if value is not None:
            return value
        lower = name.lower()
        for key, candidate in self.query.items():
            if key.lower() == lower:
                return candidate
        return None


def _combined_headers(raw_headers: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], tuple[str, ...]]:
    """Headers with repeated names joined by commas (RFC 9110 §5.3), and the ``X-HTTP-Method``
    lines one by one (more than one is an error of its own)."""
    headers: dict[str, str] = {}
    tunnels: list[str] = []
    for raw_name, raw_value in raw_headers:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name == "x-http-method":
            tunnels.append(value)
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers, tuple(tunnels)


@dataclass(slots=True)
class Response:
    status: int
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    preserve_case: list[bytes] | None = None  # header names to send in the case given


class RequestIds:
    """GUID-shaped request ids: a random per-process prefix and a counter, cheaper than uuid4."""

    def __init__(self) -> None:
        prefix = os.urandom(8).hex()
        self._prefix = f"{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-"
        self._counter = itertools.count(1)

    def next(self) -> str:
        value = next(self._counter)
        return f"{self._prefix}{(value >> 48) & 0xFFFF:04x}-{value & 0xFFFFFFFFFFFF:012x}"


class Clock:
    """RFC 1123 ``Date`` values, formatted once per second rather than once per request."""

    def __init__(self) -> None:
        self._second = -1
        self._text = b""

    def http_date(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._text = formatdate(now, usegmt=True).encode("ascii")
        return self._text


def error_time() -> str:
    """The ``Time:`` line of error messages: ``yyyy-MM-ddTHH:mm:ss.fffffffZ``."""
    now = time.time_ns()
    seconds, rest = divmod(now, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 100:07d}Z"
