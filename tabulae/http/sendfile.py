"""Response bodies sent straight from a file: ``sendfile(2)``, from the page cache to the socket.

A download read into Python and written to the socket crosses user space twice (a ``pread``
into a new object, then a copy into the socket); ``sendfile`` hands the kernel the file and the
range and no byte comes up. uvloop, which serves our connections, has no ``loop.sendfile``, so
the connection's protocol offers it to the application itself, as the ASGI scope extension
:data:`SENDFILE` (a coroutine function ``(fd, offset, count) -> bool``), on plain TCP only: TLS
encrypts in user space, so a body sent over it is read as before (:meth:`FilePiece.chunks`).

How one range goes out (:class:`FileSender`): what the transport still holds (the response
head) is sent first; then a helper thread calls ``sendfile`` on a duplicate of the socket's
descriptor until the socket's buffer is full (it never waits for the client, so a slow reader
holds no thread), and the loop waits for the socket to be writable again. The duplicate means
the descriptor number written to is ours until we close it: a connection closed meanwhile can
never have its number reused under a transfer in progress. A file that is shorter than the
range ends the response (the client sees a short body, as when a read fails mid-stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from tabulae.model.errors import ServiceError

SENDFILE = "tabulae.sendfile"  # the ASGI scope extension offered on plain-TCP connections

SendFile = Callable[[int, int, int], Awaitable[bool]]


class FilePiece(Protocol):
    """A piece of a response body that is a range of an open file (a store's content file)."""

    @property
    def fd(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def count(self) -> int: ...

    def chunks(self) -> AsyncIterator[bytes]:
        """The same bytes read into memory, for connections that cannot take :data:`SENDFILE`."""
        ...


class FileSender:
    """``sendfile`` for one connection's transport (uvloop's, or asyncio's, over TCP)."""

    __slots__ = ("_loop", "_transport", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport) -> None:
        self._loop = loop
        self._transport = transport
        self._waiter: asyncio.Future[None] | None = None

    async def send(self, fd: int, offset: int, count: int) -> bool:
        """Send ``count`` bytes of ``fd`` from ``offset``; False when the connection is gone
        first. Raises ServiceError when the file ends before the range does."""
        transport = self._transport
        if not await self._drained():
            return False
        sock = transport.get_extra_info("socket")
        if sock is None:
            return False
        out = os.dup(sock.fileno())
        try:
            while count:
                try:
                    sent = await self._loop.run_in_executor(None, _send_some, out, fd, offset, count)
                except (BrokenPipeError, ConnectionError):
                    transport.abort()
                    return False
                offset += sent
                count -= sent
                if count and not await self._writable(out):
                    return False
            return True
        finally:
            os.close(out)

    def lost(self) -> None:
        """The connection is gone: a transfer waiting for the socket gives up."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _drained(self) -> bool:
        """Wait until the transport has written everything it holds (normally at once: the
        head of the response is small), so our bytes follow it on the wire."""
        transport = self._transport
        delay = 0.0005
        while transport.get_write_buffer_size():
            if transport.is_closing():
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return not transport.is_closing()

    async def _writable(self, out: int) -> bool:
        """Wait for room in the socket's buffer; False when the connection went away instead."""
        waiter = self._waiter = self._loop.create_future()
        self._loop.add_writer(out, _wake, waiter)
        try:
            await waiter
        finally:
            self._loop.remove_writer(out)
            self._waiter = None
        return not self._transport.is_closing()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _send_some(out: int, fd: int, offset: int, count: int) -> int:
    """On a helper thread: ``sendfile`` until the range is sent or the socket's buffer is full
    (the socket is non-blocking); the number of bytes sent."""
    total = 0
    while count:
        try:
            sent = os.sendfile(out, fd, offset, count)
        except BlockingIOError:
            return total
        except InterruptedError:
            continue
        if sent == 0:
            raise ServiceError("InternalError", detail="blob content is short")
        total += sent
        offset += sent
        count -= sent
    return total


async def send_pieces(piece: FilePiece, send: Callable[[bytes], Awaitable[bool]]) -> bool:
    """A file piece read into memory and sent chunk by chunk (the path over TLS); False once
    ``send`` says the client is gone."""
    chunks = piece.chunks()
    try:
        async for chunk in chunks:
            if not await send(chunk):
                return False
        return True
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):
                await aclose()
