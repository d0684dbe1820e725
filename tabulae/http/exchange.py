"""The steps of a request every service's front-end takes alike: reading the body under its size
and time limits, sending the response with the headers every Azure response carries, and the
access log line."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import orjson

from tabulae.http.messages import SERVER_HEADER, Clock, Headers, Request, Response, error_time
from tabulae.http.versions import KNOWN_VERSIONS, response_version
from tabulae.model.errors import ServiceError

CONNECTION_CLOSE = (b"connection", b"close")


# The slowest a body may arrive, on average, once its first ``timeout`` seconds are over: Azure
# allows a write ten minutes per MiB, so a client that trickles a byte a second to hold a
# connection is cut off, and a slow but steady upload of any size is not.
MIN_BODY_RATE = 1024 * 1024 / 600


async def receive_paced(receive: Any, started: float, received: int, timeout: float) -> Any:
    """The next ASGI message of a body that began arriving at ``started`` (the loop's clock) and
    has brought ``received`` bytes so far: 500 OperationTimedOut when the client pauses ``timeout``
    seconds, or when the body falls behind :data:`MIN_BODY_RATE` after its first ``timeout``
    seconds (each byte earns the client ``1 / MIN_BODY_RATE`` seconds more).

    One timer per message, as a plain pause timeout needs: the rate only moves its deadline."""
    now = asyncio.get_running_loop().time()
    deadline = min(now + timeout, started + timeout + received / MIN_BODY_RATE)
    try:
        async with asyncio.timeout_at(deadline):  # a timer, not a task
            return await receive()
    except TimeoutError:
        raise ServiceError("OperationTimedOut") from None  # a client too slow with its body


async def read_body(request: Request, receive: Any, limit: int, timeout: float) -> None:
    """Read the whole body into ``request.body``: 413 past ``limit`` bytes (at once when the
    declared length says so), 500 OperationTimedOut when the client is too slow with it
    (:func:`receive_paced`).

    Only a body read to its end marks ``request.body_read``; a response to a request whose body
    was refused or cut off closes the connection (:func:`send_response`): kept open, it would go
    on receiving the rest of that body, for as long as the client cares to send it."""
    declared = request.headers.get("content-length")
    if declared is None or declared == "0":
        if "transfer-encoding" not in request.headers:
            request.body_read = True
            return  # HTTP/1.1 framing: no length and no chunking means no body to wait for
    elif declared.isdigit() and int(declared) > limit:
        raise ServiceError("RequestBodyTooLarge")
    chunks: list[bytes] = []
    size = 0
    started = asyncio.get_running_loop().time()
    while True:
        message = await receive_paced(receive, started, size, timeout)
        if message["type"] == "http.disconnect":
            raise ServiceError("InvalidInput")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ServiceError("RequestBodyTooLarge")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    request.body = b"".join(chunks)
    request.body_read = True


async def send_response(
    send: Any,
    request: Request,
    response: Response,
    request_id: str,
    clock: Clock,
    server: tuple[bytes, bytes] = SERVER_HEADER,
) -> None:
    """Send ``response`` with Content-Length (unless it is ``unsized``), the request id,
    version, date and ``server`` headers, and the client's own request id echoed back; close the
    connection after it when the request's body was not read to its end."""
    headers = response.headers
    if not response.unsized:
        headers.append((b"content-length", str(len(response.body)).encode()))
    add_standard_headers(headers, request, request_id, clock, server, echo=not response.silent)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


def add_standard_headers(
    headers: Headers,
    request: Request,
    request_id: str,
    clock: Clock,
    server: tuple[bytes, bytes],
    *,
    echo: bool = True,
) -> None:
    """The headers every response carries (request id, version, date, server, the client's
    request id), and ``Connection: close`` when the request's body was not read to its end.
    Without ``echo``, neither the version nor the client's request id: what Azure's front-end
    answers when it refuses a request itself. Shared with responses whose body is streamed
    (``http.streaming``)."""
    headers.append((b"x-ms-request-id", request_id.encode()))
    version = response_version(request.headers.get("x-ms-version")) if echo else None
    if version is not None:
        headers.append((b"x-ms-version", version))
    headers.append((b"date", clock.http_date()))
    headers.append(server)
    client_id = request.headers.get("x-ms-client-request-id") if echo else None
    if client_id is not None and not _before_echo(request.headers.get("x-ms-version")):
        headers.append((b"x-ms-client-request-id", client_id.encode("latin-1")))
    if not request.body_read and has_body(request.headers):
        headers.append(CONNECTION_CLOSE)


#: The first version whose answers echo ``x-ms-client-request-id`` ("Version 2019-02-02": "the
#: responses for all Blob, Table and Queue APIs return the x-ms-client-request-id passed in").
FIRST_ECHOING_VERSION = "2019-02-02"


def _before_echo(version: str | None) -> bool:
    """Whether a request names a known version older than :data:`FIRST_ECHOING_VERSION`: Azure
    then answers without the client's request id (the Rust Queue SDK's recordings at 2018-03-28,
    the JS SDKs' at 2018-03-28 and 2018-11-09). Dates in ISO form compare as strings."""
    return version is not None and version in KNOWN_VERSIONS and version < FIRST_ECHOING_VERSION


def has_body(headers: dict[str, str]) -> bool:
    """Whether a request's framing announces a body (a non-zero length, or chunks)."""
    declared = headers.get("content-length")
    return (declared is not None and declared != "0") or "transfer-encoding" in headers


def log_request(request: Request, status: int, request_id: str, started: float) -> None:
    """One JSON line per request. The query string is left out: it may hold a SAS signature."""
    line = {
        "time": error_time(),
        "request_id": request_id,
        "method": request.method,
        "path": request.raw_path,
        "status": status,
        "ms": round((time.perf_counter() - started) * 1000, 3),
    }
    sys.stderr.write(orjson.dumps(line).decode() + "\n")
