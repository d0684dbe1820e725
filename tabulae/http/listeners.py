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

The claim goes with the parent process, but the workers' sockets go only when each worker has
exited: a server killed with ``kill -9`` and started again at once would join a group that still
holds a dying worker's socket, and every connection the kernel hashed to it would be reset when
it closed. So a server binds and claims every port first, then waits (briefly, bounded)
until no listening socket of its user is left on them, and only then listens on all of them.
"""

from __future__ import annotations

import errno
import os
import socket
import time

# Claims of this process's ports; never closed, so they last until the process exits.
_CLAIMS: list[socket.socket] = []
BACKLOG = 2048
DEPARTURE_SECONDS = 10.0  # how long a dying server's workers may take to let go of a port
_LISTENING = "0A"  # the TCP state LISTEN in /proc/net/tcp


def reserve(host: str, port: int, copies: int) -> list[socket.socket]:
    """The first step of listening on ``host:port``: one plain listening socket for one worker;
    for several, the first of their shared sockets, bound (``SO_REUSEPORT``) and claimed but not
    listening yet, which :func:`open_reserved` completes. Raises :class:`OSError` when the port
    is taken, by another program or by another Tabulae server."""
    if copies == 1:
        return [_socket(host, port, shared=False)]
    # Bound, not yet listening: a program that holds the port without SO_REUSEPORT fails the
    # bind at once, and any listener still found on the port later is a leftover of this user's.
    first = _socket(host, port, shared=True, listening=False)
    try:
        _claim(first.getsockname()[1])  # a second Tabulae joined the first's group: it leaves here
    except BaseException:
        first.close()
        raise
    return [first]


def open_reserved(reserved: list[list[socket.socket]], copies: int) -> list[list[socket.socket]]:
    """Every reserved port listening, with ``copies`` sockets each: once the sockets a killed
    server's workers left on these ports are gone, all ports start listening together."""
    if copies == 1:
        return reserved
    ports = [own[0].getsockname()[1] for own in reserved]
    deadline = time.monotonic() + DEPARTURE_SECONDS
    while any(_listening(port) for port in ports) and time.monotonic() < deadline:
        time.sleep(0.02)
    for own in reserved:
        own[0].listen(BACKLOG)
    for own in reserved:
        host, port = own[0].getsockname()[:2]
        for _ in range(copies - 1):
            own.append(_socket(host, port, shared=True))
    return reserved


def _claim(port: int) -> None:
    """Hold the abstract Unix socket that says "a Tabulae server shares this port"."""
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(f"\0tabulae-port-{port}")
    except OSError:
        claim.close()
        raise OSError(errno.EADDRINUSE, "Address already in use (by another Tabulae server)") from None
    _CLAIMS.append(claim)


def _listening(port: int) -> bool:
    """Whether a TCP socket of this user listens on ``port`` (Linux's /proc; elsewhere False)."""
    suffix = f":{port:04X}"
    uid = str(os.getuid())
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines, None)  # the heading
                for line in lines:
                    fields = line.split()
                    if fields[1].endswith(suffix) and fields[3] == _LISTENING and fields[7] == uid:
                        return True
        except OSError:
            continue
    return False


def _socket(host: str, port: int, *, shared: bool, listening: bool = True) -> socket.socket:
    """A listening socket as uvicorn makes one (address reuse, inheritable by worker processes)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
        if listening:
            sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def per_worker(sockets_by_port: list[list[socket.socket]]) -> list[list[socket.socket]]:
    """Regroup ``[port][copy]`` into ``[worker][port]``: each worker one socket of every port."""
    return [list(own) for own in zip(*sockets_by_port, strict=True)]
