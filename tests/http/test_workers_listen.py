"""``--workers N``: every worker takes a share of the connections, and the port stays one server's.

Workers sharing one listening socket let the first to wake accept every queued connection, so a
client opening its pool at once landed on one worker (``tabulae.http.listeners``). These tests
open connections the way such a client does and read from ``/proc`` which worker holds each.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess

CONNECTIONS = 32
REQUEST = b"GET /devstoreaccount1/Tables HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", extra_args=["--services", "table", "--workers", "2"]).start()
    try:
        yield server
    finally:
        server.stop()


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as listing:
        return [int(word) for word in listing.read().split()]


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = link.readlink().name
        except OSError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _established_inodes(port: int) -> set[str]:
    """Inodes of the server side of established TCP connections to ``port``."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[3] == "01":
            inodes.add(fields[9])
    return inodes


def _answered(sock: socket.socket) -> bytes:
    """The status line of the answer to :data:`REQUEST` (any status: a worker accepted it)."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection without answering"
        data += chunk
    return data.split(b"\r\n", 1)[0]


def test_connections_opened_at_once_reach_every_worker(two_workers: ServerProcess) -> None:
    assert two_workers.process is not None
    connections = [socket.socket() for _ in range(CONNECTIONS)]
    try:
        for sock in connections:  # all connected before any request, as a pool does
            sock.settimeout(15)
            sock.connect(("127.0.0.1", two_workers.port))
        for sock in connections:
            sock.sendall(REQUEST)
        for sock in connections:
            assert _answered(sock).startswith(b"HTTP/1.1 ")
        established = _established_inodes(two_workers.port)
        # The server's children: the two workers and multiprocessing's resource tracker.
        held = {pid: len(_socket_inodes(pid) & established) for pid in _children(two_workers.process.pid)}
        assert sum(held.values()) == CONNECTIONS, held
        # The kernel hashes each connection to one worker's socket: all 32 on one worker would
        # come about once in 2**31 runs.
        assert sum(1 for count in held.values() if count > 0) == 2, held
    finally:
        for sock in connections:
            sock.close()


def test_a_second_server_on_the_port_is_refused(two_workers: ServerProcess, tmp_path: Path) -> None:
    # Its sockets could join the first server's (SO_REUSEPORT); the port's claim keeps it out.
    command = [
        sys.executable, "-m", "tabulae", "serve", "--services", "table", "--workers", "2",
        "--port", str(two_workers.port), "--data-dir", str(tmp_path / "other"),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"tabulae: AddressInUse: cannot listen on 127.0.0.1:{two_workers.port} for the Table service"
    )
    assert "another Tabulae server" in result.stderr
    # The first server still answers, and on the same port a one-worker server is refused too.
    with socket.create_connection(("127.0.0.1", two_workers.port), timeout=5) as sock:
        sock.sendall(REQUEST)
        assert _answered(sock).startswith(b"HTTP/1.1 ")
    command[command.index("--workers") + 1] = "1"
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert f"cannot listen on 127.0.0.1:{two_workers.port}" in result.stderr
