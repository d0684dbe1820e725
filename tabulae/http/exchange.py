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
from tabulae.http.protocol import PRESERVE_CASE_KEY
from tabulae.model.errors import TableError

DEFAULT_VERSION = "2019-02-02"  # echoed as x-ms-version when a request names none


async def read_body(request: Request, receive: Any, limit: int, timeout: float) -> None:
    """Read the whole body into ``request.body``: 413 past ``limit`` bytes (at once when the
    declared length says so), 500 OperationTimedOut when the client pauses ``timeout`` seconds."""
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
            async with asyncio.timeout(timeout):  # a timer, not a task
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


async def send_response(
    send: Any, request: Request, response: Response, request_id: str, clock: Clock
) -> None:
    """Send ``response`` with Content-Length, the request id, version, date and server headers,
    and the client's own request id echoed back."""
    headers = response.headers
    headers.append((b"content-length", str(len(response.body)).encode()))
    add_standard_headers(headers, request, request_id, clock)
    await send(start_message(response))
    await send({"type": "http.response.body", "body": response.body})


def start_message(response: Response) -> dict[str, Any]:
    message = {"type": "http.response.start", "status": response.status, "headers": response.headers}
    if response.preserve_case:
        message[PRESERVE_CASE_KEY] = response.preserve_case
    return message


def add_standard_headers(headers: Headers, request: Request, request_id: str, clock: Clock) -> None:
    """The headers every response carries: request id, version, date, server, client request id."""
    headers.append((b"x-ms-request-id", request_id.encode()))
    headers.append((b"x-ms-version", request.headers.get("x-ms-version", DEFAULT_VERSION).encode("latin-1")))
    headers.append((b"date", clock.http_date()))
    headers.append(SERVER_HEADER)
    client_id = request.headers.get("x-ms-client-request-id")
    if client_id is not None:
        headers.append((b"x-ms-client-request-id", client_id.encode("latin-1")))


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
