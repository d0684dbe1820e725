"""The HTTP/1.1 protocol: uvicorn's httptools parser, with Azure-style answers to broken requests.

Requests that cannot be parsed never reach the application, so uvicorn would answer them with a
plain-text 400. Here they get the service's XML ``<Error>`` body and ``x-ms-error-code``, like
every other error, and the request line and header block are capped (Azure accepts URLs of about
32 KiB; we take twice that) so an endless line cannot grow a buffer without bound.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tabulae.http.errors import error_xml
from tabulae.http.messages import HEADER_CASE, META_NAMES_EXTENSION, error_time
from tabulae.model.errors import TableError

# A request body is buffered up to this much before reading pauses (uvicorn pauses at 64 KiB):
# a large upload then reaches the application in a few large pieces rather than many small
# ones, which costs far less per byte, and a connection still holds at most this much.
BODY_HIGH_WATER = 1024 * 1024

MAX_URL_BYTES = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
HEADER_TIMEOUT_SECONDS = 30.0  # a request line and headers arriving slower than this are cut off
# An idle keep-alive connection (one that has had its answer) is closed after this many seconds
# by uvicorn's own timer; a connection that never sends a byte, after the header timeout.
KEEP_ALIVE_SECONDS = 5.0


class _TooLarge(Exception):
    """Raised from a parser callback; httptools turns it into a parse error we then answer."""


_CASE_LINE = b"\r\n" + HEADER_CASE + b": "


def restore_header_case(head: bytes) -> bytes:
    """Give the header names listed in the :data:`HEADER_CASE` line of a response head their
    case back (uvicorn writes every name lower-cased), and drop that line."""
    start = head.find(_CASE_LINE)
    if start < 0:
        return head
    end = head.index(b"\r\n", start + len(_CASE_LINE))
    names = head[start + len(_CASE_LINE) : end].split(b",")
    head = head[:start] + head[end:]
    for name in names:
        head = head.replace(b"\r\n" + name.lower() + b": ", b"\r\n" + name + b": ", 1)
    return head


class CoalescingTransport:
    """A transport that sends the writes of one turn of the event loop together.

    uvicorn writes a response's status line and headers, then its body, as two writes: two
    system calls and two TCP segments for every small response, which on loopback cost more than
    most of the request's own work. Writes are held here until the loop's next turn and then go
    out as one ``writelines`` (a single vectored write, no copy). Everything else is the
    transport's own; ``close`` first sends what is held, ``abort`` drops it.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        if data[:5] == b"HTTP/" and _CASE_LINE in data:  # a response head naming cased headers
            data = restore_header_case(data)
        self._pending.append(data)

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.writelines(pending)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class AzureHttpProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with size caps, Azure error bodies for unparseable requests, and
    a response's writes sent together (:class:`CoalescingTransport`).

    Every connection is on a clock: one that never sends a byte is closed after
    ``header_timeout`` (uvicorn only times connections out between requests); a request whose
    line and headers take longer than that is answered 500 ``OperationTimedOut`` and closed; an
    idle one after an answer is closed by uvicorn's keep-alive timer (:data:`KEEP_ALIVE_SECONDS`).
    """

    _error: TableError | None = None
    _header_bytes = 0
    _header_timer: asyncio.TimerHandle | None = None
    header_timeout = HEADER_TIMEOUT_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
        self._header_timer = self.loop.call_later(self.header_timeout, self._silent_too_long)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._error = None
        self._header_bytes = 0
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _silent_too_long(self) -> None:
        """A connection that has not begun a request in time holds a socket for nothing: close it."""
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _headers_too_slow(self) -> None:
        """A client trickling its headers holds a connection; answer and close it (slowloris)."""
        self._header_timer = None
        if not self.transport.is_closing():
            self._error = TableError("OperationTimedOut")
            self.send_400_response("slow request")

    def on_body(self, body: bytes) -> None:
        """uvicorn's own, with :data:`BODY_HIGH_WATER` as the point where reading pauses."""
        cycle = self.cycle
        if cycle.response_complete or (self.parser.should_upgrade() and self._should_upgrade()):
            return
        cycle.body += body
        if len(cycle.body) > BODY_HIGH_WATER:
            self.flow.pause_reading()
        cycle.message_event.set()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_URL_BYTES:
            self._error = TableError("RequestUrlTooLong")
            raise _TooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > MAX_HEADER_BYTES:
            self._error = TableError("RequestHeaderTooLarge")
            raise _TooLarge
        if name[:10].lower() == b"x-ms-meta-":  # metadata names keep the case they were sent in
            extensions: dict[str, Any] = self.scope.setdefault("extensions", {})  # type: ignore[assignment]
            extensions.setdefault(META_NAMES_EXTENSION, []).append(name.decode("latin-1"))
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        error = self._error or TableError("InvalidUri", "The request could not be parsed as HTTP/1.1.")
        request_id = os.urandom(16).hex()
        body = error_xml(error, request_id, error_time(), table_style=False)
        reason = {400: "Bad Request", 414: "URI Too Long", 500: "Internal Server Error"}.get(
            error.status, "Error"
        )
        head = (
            f"HTTP/1.1 {error.status} {reason}\r\n"
            f"content-type: application/xml\r\nx-ms-error-code: {error.code}\r\n"
            f"x-ms-request-id: {request_id}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode("ascii") + body)
        self.transport.close()
