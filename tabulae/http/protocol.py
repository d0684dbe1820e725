"""The HTTP/1.1 protocol: uvicorn's httptools parser, with Azure-style answers to broken requests.

Requests that cannot be parsed never reach the application, so uvicorn would answer them with a
plain-text 400. Here they get the service's XML ``<Error>`` body and ``x-ms-error-code``, like
every other error, and the request line and header block are capped (Azure accepts URLs of about
32 KiB; we take twice that) so an endless line cannot grow a buffer without bound.

How connections end matters as much: a connection answered before its request's body has all
arrived (413, or any error found from the headers) is closed gently, so a client that writes its
whole body before reading sees the answer rather than a reset (:class:`_Drain`); one client
address may hold only so many connections at once; and a server stopping gives requests in
flight a bounded time to finish.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tabulae.http.errors import error_xml
from tabulae.http.messages import HEADER_CASE, META_NAMES_EXTENSION, error_time
from tabulae.http.sendfile import SENDFILE, FileSender
from tabulae.model.errors import ServiceError

# A request body is queued up to this much before reading pauses (uvicorn pauses at 64 KiB): the
# network keeps a large upload coming while the application writes and hashes what came before,
# and a connection still holds at most this much.
BODY_HIGH_WATER = 1024 * 1024

MAX_URL_BYTES = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024
HEADER_TIMEOUT_SECONDS = 30.0  # a request line and headers arriving slower than this are cut off
# An idle keep-alive connection (one that has had its answer) is closed after this many seconds
# by uvicorn's own timer; a connection that never sends a byte, after the header timeout.
KEEP_ALIVE_SECONDS = 5.0
# A connection closed while its client may still be sending (its answer came before the end of
# the body) is half-closed and read to nothing for at most this long and this much, then closed.
DRAIN_SECONDS = 5.0
DRAIN_BYTES = 32 * 1024 * 1024
# A TLS connection the stopping server closes sends its close_notify, then waits for the client's;
# an idle pooled client never reads it to answer. So its socket is closed this long after (a
# one-sided TLS close, as HTTP allows) rather than holding the server's exit up.
TLS_CLOSE_SECONDS = 1.0


_REASONS = {400: "Bad Request", 414: "URI Too Long", 500: "Internal Server Error", 503: "Service Unavailable"}


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

    ``close`` asks ``linger`` first: when it takes the connection over (the client may still be
    sending, :class:`_Drain`), the socket stays open for a while, but to uvicorn the connection
    is closing from then on; a second ``close`` closes it for good.
    """

    __slots__ = ("_closing", "_linger", "_loop", "_pending", "_transport")

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        linger: Callable[[asyncio.Transport], bool] | None = None,
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._linger = linger
        self._closing = False

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
        if not self._closing:
            self._closing = True
            if self._linger is not None and self._linger(self._transport):
                return
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._closing = True
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Drain(asyncio.Protocol):
    """What a connection becomes once it has been answered while its client may still be sending.

    Closing such a connection at once with unread bytes in its receive buffer makes the kernel
    reset it, and a client that writes its whole body before it reads (the Node SDK, most HTTP
    libraries for a body that fits their buffers) gets ``ECONNRESET`` instead of the answer
    waiting for it. So the answer goes out, the write side is shut (the client reads the answer
    and then end-of-stream, as from any closed connection), and what still arrives is read and
    dropped until the client closes, or for :data:`DRAIN_SECONDS` and :data:`DRAIN_BYTES` at
    most. The HTTP protocol hears of the end as usual (``connection_lost``).
    """

    __slots__ = ("_left", "_owner", "_timer", "_transport")

    def __init__(self, owner: AzureHttpProtocol, transport: asyncio.Transport) -> None:
        self._owner = owner
        self._transport = transport
        self._left = DRAIN_BYTES
        self._timer = owner.loop.call_later(DRAIN_SECONDS, transport.close)
        if transport.can_write_eof():  # not over TLS, which cannot half-close
            transport.write_eof()
        transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self._left -= len(data)
        if self._left < 0:
            self._transport.close()

    def eof_received(self) -> bool:
        return False  # the client has sent everything: the transport closes

    def close(self) -> None:
        self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._timer.cancel()
        self._owner.connection_lost(exc)


class _BodyParts:
    """A request body's pieces, handed to the application one ASGI message each, as they came.

    uvicorn joins every piece that arrives while the application is busy into one buffer and
    copies that into a new ``bytes`` for each message: two copies of every byte of an upload,
    into memory fresh from the allocator (page faults). Here each piece the parser produced is
    a message of its own, so a byte is never copied again. ``receive`` replaces the cycle's own
    and otherwise behaves as it does: ``100 Continue`` when asked for, reading resumed while
    the queue is under :data:`BODY_HIGH_WATER`, ``http.disconnect`` once the client has gone or
    the response is complete.
    """

    __slots__ = ("_cycle", "_parts", "_size")

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._parts: deque[bytes] = deque()
        self._size = 0

    def add(self, body: bytes) -> None:
        self._parts.append(body)
        self._size += len(body)
        if self._size > BODY_HIGH_WATER:
            self._cycle.flow.pause_reading()

    async def receive(self) -> dict[str, Any]:
        cycle = self._cycle
        if cycle.waiting_for_100_continue and not cycle.transport.is_closing():
            cycle.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            cycle.waiting_for_100_continue = False
        parts = self._parts
        if not cycle.disconnected and not cycle.response_complete:
            if not parts:
                cycle.flow.resume_reading()
                await cycle.message_event.wait()
            cycle.message_event.clear()
        if cycle.disconnected or cycle.response_complete:
            return {"type": "http.disconnect"}
        body = b""
        if parts:
            body = parts.popleft()
            self._size -= len(body)
            if self._size <= BODY_HIGH_WATER:
                cycle.flow.resume_reading()
        return {"type": "http.request", "body": body, "more_body": bool(parts) or cycle.more_body}


class AzureHttpProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` with size caps, Azure error bodies for unparseable requests, and
    a response's writes sent together (:class:`CoalescingTransport`).

    Every connection is on a clock: one that never sends a byte is closed after
    ``header_timeout`` (uvicorn only times connections out between requests); a request whose
    line and headers take longer than that is answered 500 ``OperationTimedOut`` and closed; an
    idle one after an answer is closed by uvicorn's keep-alive timer (:data:`KEEP_ALIVE_SECONDS`).
    (A body's own pace is the application's to judge: ``http.exchange.receive_paced``.)

    A client address may hold ``max_per_client`` connections to a worker at once (0: any number);
    one more is answered 503 ``ServerBusy`` at once, as an overloaded Azure front-end answers,
    and closed: the SDKs retry that answer with back-off, and a refusal costs one small write,
    no parsing and no timer of the header clock. When the server stops, a request in flight has
    ``shutdown_timeout`` seconds to finish before its connection is aborted.
    """

    _error: ServiceError | None = None
    _header_bytes = 0
    _header_timer: asyncio.TimerHandle | None = None
    _stop_timer: asyncio.TimerHandle | None = None
    _drain: _Drain | None = None
    _file_sender: FileSender | None = None  # plain-TCP connections: bodies may come from files
    _body: _BodyParts | None = None  # the body of the request being read
    _counted: str | None = None  # the client address this connection counts against
    _gone = False
    _refused = False
    header_timeout = HEADER_TIMEOUT_SECONDS
    max_per_client = 0
    shutdown_timeout = 5.0
    # Open connections by client address, in this worker process (every connection of a worker
    # runs on its one event loop, so a plain dict needs no lock).
    _per_client: dict[str, int] = {}  # noqa: RUF012 - shared by the worker's connections on purpose

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop, self._linger))  # type: ignore[arg-type]
        if self.scheme == "http":  # TLS encrypts in user space: no sendfile there
            self._file_sender = FileSender(self.loop, transport)
        if self.max_per_client and self.client is not None:
            address = self.client[0]
            open_now = self._per_client.get(address, 0)
            if open_now >= self.max_per_client:
                self._answer_and_close(ServiceError("ServerBusy"))
                return
            self._per_client[address] = open_now + 1
            self._counted = address
        self._header_timer = self.loop.call_later(self.header_timeout, self._silent_too_long)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._error = None
        self._header_bytes = 0
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def on_headers_complete(self) -> None:
        self._disarm()
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not before and cycle is not None:  # a request for the application
            self._body = _BodyParts(cycle)
            cycle.receive = self._body.receive  # type: ignore[method-assign,assignment]
            if self._file_sender is not None:  # bound to this cycle: a pipelined one may follow
                extensions: dict[str, Any] = self.scope.setdefault("extensions", {})  # type: ignore[assignment]
                extensions[SENDFILE] = partial(self._send_file, cycle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = True
        self._disarm()
        if self._file_sender is not None:
            self._file_sender.lost()
        if self._stop_timer is not None:
            self._stop_timer.cancel()
        address = self._counted
        if address is not None:
            self._counted = None
            left = self._per_client[address] - 1
            if left:
                self._per_client[address] = left
            else:
                del self._per_client[address]
        super().connection_lost(exc)

    async def _send_file(self, cycle: Any, fd: int, offset: int, count: int) -> bool:
        """The :data:`SENDFILE` extension of ``cycle``'s request: ``count`` bytes of ``fd`` from
        ``offset`` as the next part of its response's body, after what was written before them;
        False when the client is gone."""
        sender = self._file_sender
        if self._gone or sender is None or cycle.disconnected:
            return False
        if not cycle.response_started or cycle.response_complete:
            raise RuntimeError("sendfile outside a response body")
        if count > cycle.expected_content_length:
            raise RuntimeError("Response content longer than Content-Length")
        cast(CoalescingTransport, self.transport).flush()  # the head and earlier body go first
        if not await sender.send(fd, offset, count):
            return False
        cycle.expected_content_length -= count
        return True

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _linger(self, transport: asyncio.Transport) -> bool:
        """Asked by the transport on ``close``: when the client may still be sending (the request
        in progress has not all arrived, or the connection was refused before reading anything),
        hand the connection to a :class:`_Drain` and say so."""
        if self._gone or self._drain is not None:
            return False
        cycle = self.cycle
        if not self._refused and (cycle is None or not cycle.more_body):
            return False
        self._disarm()
        self._drain = _Drain(self, transport)
        transport.set_protocol(self._drain)
        return True

    def shutdown(self) -> None:
        """The server is stopping: idle connections close now (uvicorn's own; over TLS, without
        waiting long for the client's close_notify), one lingering after its answer too, and one
        with a request in flight once that request is answered, or after ``shutdown_timeout``
        seconds, whichever comes first."""
        if self._drain is not None:
            self._drain.close()
            return
        super().shutdown()
        if not self.transport.is_closing():
            self._stop_timer = self.loop.call_later(self.shutdown_timeout, self._stop_now)
        elif self.scheme == "https" and not self._gone:
            self._stop_timer = self.loop.call_later(TLS_CLOSE_SECONDS, self._stop_now)

    def _stop_now(self) -> None:
        """A request still in flight when the server must stop: its client gets a reset (it retries;
        a body that had not all arrived was never applied), and the application sees the client
        gone, so its handler ends."""
        self._stop_timer = None
        if self._drain is not None:
            self._drain.close()
        elif not self._gone:
            self.transport.abort()

    def _silent_too_long(self) -> None:
        """A connection that has not begun a request in time holds a socket for nothing: close it."""
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _headers_too_slow(self) -> None:
        """A client trickling its headers holds a connection; answer and close it (slowloris)."""
        self._header_timer = None
        if not self.transport.is_closing():
            self._error = ServiceError("OperationTimedOut")
            self.send_400_response("slow request")

    def on_body(self, body: bytes) -> None:
        """uvicorn's own, except that the body's pieces are queued as they came rather than
        joined (:class:`_BodyParts`), and reading pauses past :data:`BODY_HIGH_WATER`."""
        cycle = self.cycle
        if cycle.response_complete or (self.parser.should_upgrade() and self._should_upgrade()):
            return
        parts = self._body
        if parts is None:  # not a request the application reads (cannot happen with httptools)
            return
        parts.add(body)
        cycle.message_event.set()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_URL_BYTES:
            self._error = ServiceError("RequestUrlTooLong")
            raise _TooLarge

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > MAX_HEADER_BYTES:
            self._error = ServiceError("RequestHeaderTooLarge")
            raise _TooLarge
        if name[:10].lower() == b"x-ms-meta-":  # metadata names keep the case they were sent in
            extensions: dict[str, Any] = self.scope.setdefault("extensions", {})  # type: ignore[assignment]
            extensions.setdefault(META_NAMES_EXTENSION, []).append(name.decode("latin-1"))
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        error = self._error or ServiceError("InvalidUri", "The request could not be parsed as HTTP/1.1.")
        self.transport.write(error_answer(error))
        self.transport.close()

    def _answer_and_close(self, error: ServiceError) -> None:
        """Answer before any request has been read (a refused connection), then drain and close:
        the client reads the answer after sending its request."""
        self._refused = True
        self.transport.write(error_answer(error))
        self.transport.close()


def error_answer(error: ServiceError) -> bytes:
    """A whole response, head and XML ``<Error>`` body, that closes its connection: for what is
    answered below the application (nothing routed the request to a service yet)."""
    request_id = os.urandom(16).hex()
    body = error_xml(error, request_id, error_time(), table_style=False)
    head = (
        f"HTTP/1.1 {error.status} {_REASONS.get(error.status, 'Error')}\r\n"
        f"content-type: application/xml\r\nx-ms-error-code: {error.code}\r\n"
        f"x-ms-request-id: {request_id}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body
