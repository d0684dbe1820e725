"""The request and response objects of the front-end: thin, allocation-light views over ASGI."""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, quote

from tabulae.model.errors import ServiceError

Headers = list[tuple[bytes, bytes]]

SERVER_HEADER = (b"server", b"Tabulae/0.1 (Windows-Azure-Table/1.0 compatible)")
NO_CACHE = (b"cache-control", b"no-cache")
NOSNIFF = (b"x-content-type-options", b"nosniff")
# The scope extension under which our protocol hands over the x-ms-meta-* header names as sent:
# ASGI lower-cases header names, and metadata names keep their case.
META_NAMES_EXTENSION = "tabulae.meta_names"
# And back: uvicorn lower-cases response header names too, so a response whose header names must
# keep their case lists them in this header, which our protocol removes as it restores the case.
HEADER_CASE = b"x-tabulae-header-case"
# Query strings up to this long have their parse cached (a SAS client sends the same token on
# every request, and decoding its percent-escapes costs more than the rest of the SAS check):
# at most QUERY_CACHE_SIZE of them, so the cache holds a few MiB at worst.
QUERY_CACHE_LENGTH = 2048
QUERY_CACHE_SIZE = 1024


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
    raw_headers: list[tuple[bytes, bytes]] = field(default_factory=list, repr=False)  # as ASGI gives them
    meta_names: list[str] | None = None  # x-ms-meta-* names in their sent case (our protocol keeps them)
    _pairs: list[tuple[str, str]] | None = field(default=None, repr=False)
    _query: dict[str, str] | None = field(default=None, repr=False)
    body_read: bool = False  # the whole body has been received (or there was none)
    operation: str = ""  # the operation's REST name once the service has resolved it (for tracing)
    batch: Any = None  # for a sub-request of a batch, that batch (what its sub-requests may do)
    actions: frozenset[str] | None = None  # a bearer token's role actions, when roles are enforced

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
            raw_headers=raw_headers,
            meta_names=scope.get("extensions", {}).get(META_NAMES_EXTENSION),
        )

    @property
    def query_pairs(self) -> list[tuple[str, str]]:
        """Every form-decoded query parameter in order (``+`` is a space), repeats kept (what
        the Blob/Queue Shared Key signs)."""
        if self._pairs is None:
            text = self.query_string
            if not text:
                self._pairs = []
            elif len(text) <= QUERY_CACHE_LENGTH:
                self._pairs = list(_parse_query_cached(text))
            else:
                self._pairs = _parse_query(text)
        return self._pairs

    @property
    def query(self) -> dict[str, str]:
        """The query parameters by name. A repeated name has its values joined with commas, as
        Azure reads them (a .NET ``NameValueCollection``): never the first or last alone, so a
        repeated SAS field can no longer match its signature and ``sig=a&sig=b`` is refused."""
        if self._query is None:
            parsed: dict[str, str] = {}
            if not self.query_string:
                self._query = parsed
                return parsed
            for name, value in self.query_pairs:
                parsed[name] = f"{parsed[name]},{value}" if name in parsed else value
            self._query = parsed
        return self._query

    def query_ci(self, name: str) -> str | None:
        """A query parameter matched case-insensitively (continuation tokens, SAS fields); names
        differing only in case are one parameter, their values joined like repeats."""
        lower = name.lower()
        values = [value for key, value in self.query.items() if key.lower() == lower]
        if not values:
            return None
        return values[0] if len(values) == 1 else ",".join(values)


def _parse_query(text: str) -> list[tuple[str, str]]:
    """Form-decode a query string; undecodable escapes are 400 InvalidQueryParameterValue."""
    try:
        return parse_qsl(text, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError as exc:
        raise ServiceError("InvalidQueryParameterValue") from exc


@lru_cache(maxsize=QUERY_CACHE_SIZE)
def _parse_query_cached(text: str) -> tuple[tuple[str, str], ...]:
    """:func:`_parse_query`, remembered for the most recent short query strings (errors are not)."""
    return tuple(_parse_query(text))


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
    silent: bool = False  # echo neither x-ms-version nor x-ms-client-request-id (a front-end refusal)
    unsized: bool = False  # no Content-Length at all: a 204 some operations answer so (Set Blob Tags)


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
