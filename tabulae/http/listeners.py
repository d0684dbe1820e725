"""Listening sockets: one set shared by a single worker, or one set per worker.

Worker processes that share one listening socket do not share its connections: they all wait on
it, the first to wake accepts every connection in the queue, and a client that opens its
connections at once (a connection pool, wrk's 32) lands them all on one worker while the others
idle. Measured: 24,365 of 24,366 inserts of a 5 s benchmark went to one of two workers, which
ran on one core while the other stayed free.

So with several workers each gets listening sockets of its own, bound to the same address with
``SO_REUSEPORT``: the kernel then hashes every new connection (by its addresses and ports) to
one of them, and each worker accepts only its share. ``SO_REUSEPORT`` lets any socket of the
same user that sets it join the group, so a second server started on the same port would share
the connections instead of failing as busy; a claim on an abstract Unix socket named after the
port, held by the parent process for its lifetime, keeps a second Tabulae out (the kernel
releases it however the process ends).
"""

from __future__ import annotations

import errno
import socket

# Claims of this process's ports; never closed, so they last until the process exits.
_CLAIMS: list[socket.socket] = []


def listen(host: str, port: int, copies: int) -> list[socket.socket]:
    """``copies`` sockets listening on ``host:port``: one plain socket for one worker, else one
    per worker sharing the port (``SO_REUSEPORT``). Raises :class:`OSError` when the port is
    taken, by another program or by another Tabulae server."""
    if copies == 1:
        return [_socket(host, port, shared=False)]
    sockets = [_socket(host, port, shared=True)]
    port = sockets[0].getsockname()[1]  # the port the system chose, when asked for port 0
    try:
        _claim(port)  # a second Tabulae joined the first's group above: it leaves here
        for _ in range(copies - 1):
            sockets.append(_socket(host, port, shared=True))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _claim(port: int) -> None:
    """Hold the abstract Unix socket that says "a Tabulae server shares this port"."""
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(f"\0tabulae-port-{port}")
    except OSError:
        claim.close()
        raise OSError(errno.EADDRINUSE, "Address already in use (by another Tabulae server)") from None
    _CLAIMS.append(claim)


def _socket(host: str, port: int, *, shared: bool) -> socket.socket:
    """A listening socket as uvicorn makes one (address reuse, inheritable by worker processes)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def per_worker(sockets_by_port: list[list[socket.socket]]) -> list[list[socket.socket]]:
    """Regroup ``[port][copy]`` into ``[worker][port]``: each worker one socket of every port."""
    return [list(own) for own in zip(*sockets_by_port, strict=True)]
