"""Bodies too large to hold: a request body read as it arrives, and a response body sent as it
is produced, with the network's own back-pressure in both directions.

:func:`read_body <tabulae.http.exchange.read_body>` reads a body whole, which suits documents
capped at a few MiB. Blob content runs to gigabytes, so it goes through here: :func:`body_chunks`
yields the ASGI messages' bytes as they come (uvicorn stops reading the socket while they are
not consumed), and :func:`send_streamed` sends a :class:`StreamedResponse` piece by piece,
waiting whenever the client reads slower than the pieces come.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from tabulae.http.exchange import add_standard_headers, receive_paced
from tabulae.http.messages import Clock, Request, Response
from tabulae.http.sendfile import FilePiece, SendFile, send_pieces
from tabulae.model.errors import ServiceError


@dataclass(slots=True)
class StreamedResponse(Response):
    """A response whose body comes from ``stream`` (``length`` bytes in all, or as many as it
    yields when ``chunked``: sent with chunked transfer encoding), or, for HEAD, a response that
    announces ``length`` bytes and sends none."""

    stream: AsyncIterator[bytes | FilePiece] | None = None
    length: int = 0
    chunked: bool = False


async def body_chunks(request: Request, receive: Any, timeout: float) -> AsyncIterator[bytes]:
    """The request body, chunk by chunk, as the client sends it; ``request.body_read`` once it
    has all come (the connection can then serve another request). A client too slow with it
    gets 500 OperationTimedOut (:func:`receive_paced <tabulae.http.exchange.receive_paced>`);
    one that goes away ends the request."""
    started = asyncio.get_running_loop().time()
    received = 0
    while True:
        message = await receive_paced(receive, started, received, timeout)
        if message["type"] == "http.disconnect":
            raise ServiceError(
                "InvalidInput", "The client closed the connection before sending the whole body."
            )
        chunk = message.get("body", b"")
        if chunk:
            received += len(chunk)
            yield chunk
        if not message.get("more_body", False):
            request.body_read = True
            return


async def send_streamed(
    send: Any,
    receive: Any,
    request: Request,
    response: StreamedResponse,
    request_id: str,
    clock: Clock,
    server: tuple[bytes, bytes],
    sendfile: SendFile | None = None,
) -> None:
    """Send ``response`` with the standard headers; its stream is read only as fast as the
    client takes it, and no further once the client has gone. A piece that is a range of a file
    goes out by ``sendfile`` where the connection offers it (:mod:`tabulae.http.sendfile`), else
    read. An error from the stream after the headers went out can only end the connection: the
    client sees a short body."""
    headers = response.headers
    if not response.chunked:
        headers.append((b"content-length", str(response.length).encode()))
    add_standard_headers(headers, request, request_id, clock, server)
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    stream = response.stream
    if stream is None:
        await send({"type": "http.response.body", "body": b""})
        return
    gone = asyncio.Event()
    watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, gone))

    async def send_chunk(chunk: bytes) -> bool:
        if gone.is_set():
            return False  # nobody is reading
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await asyncio.sleep(0)  # lets the transport flush, so its back-pressure is seen
        return True

    try:
        async for piece in stream:
            if isinstance(piece, bytes):
                sent = await send_chunk(piece)
            elif sendfile is not None and not gone.is_set():
                sent = await sendfile(piece.fd, piece.offset, piece.count)
            else:
                sent = await send_pieces(piece, send_chunk)
            if not sent:
                return
        await send({"type": "http.response.body", "body": b""})
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _watch_disconnect(receive: Any, gone: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return
