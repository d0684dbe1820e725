"""Requests that arrive too slowly are cut off with an Azure error and free their connection."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import backend_names, database_url
from tests.conftest import fresh_database
from tests.serverproc import ServerProcess


@pytest.fixture(params=["1", "2"], ids=["1-worker", "2-workers"])
def impatient_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    args = ["--request-timeout", "1", "--workers", request.param]
    server = ServerProcess(tmp_path / "data", extra_args=args).start()
    yield server
    server.stop()


def _body_start(length: int) -> bytes:
    """A Create Table request declaring ``length`` body bytes, of which only the first is sent."""
    return (
        b"POST /devstoreaccount1/Tables HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n"
        b"Content-Type: application/json\r\n\r\n{" % length
    )


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(15)
    chunks = []
    while True:
        data = sock.recv(65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


@pytest.mark.timeout(60)  # a hang guard: the server must answer by itself
def test_trickled_headers_get_operation_timed_out(impatient_server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", impatient_server.port)) as sock:
        sock.sendall(b"GET /devstoreaccount1/Tables HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for _ in range(4):  # one more header now and then, never the blank line
            time.sleep(0.5)
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                break
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 500 ")
    assert b"x-ms-error-code: OperationTimedOut" in answer
    assert b"<Code>OperationTimedOut</Code>" in answer


@pytest.mark.timeout(60)
def test_a_paused_body_gets_operation_timed_out(impatient_server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", impatient_server.port)) as sock:
        sock.sendall(_body_start(100))
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 500 ")
    assert b"OperationTimedOut" in answer


@pytest.fixture(params=backend_names())
def timed_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    """``--request-timeout 1`` on every store; answering already, so timings are the server's own."""
    args = ["--request-timeout", "1", "--workers", "1"]
    if request.param == "postgres":
        args += ["--store", fresh_database(database_url("postgres"))]
    elif request.param == "citus":
        pytest.skip("the timeouts are the HTTP layer's; PostgreSQL covers the database path")
    server = ServerProcess(tmp_path / "data", extra_args=args).start()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:  # the worker is up
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        _read_all(sock)
    yield server
    server.stop()


def _answer_and_close(sock: socket.socket) -> tuple[bytes, float, float]:
    """Read until the server closes; return the bytes, when the first byte came and when it closed."""
    started = time.monotonic()
    first = closed = 0.0
    chunks = []
    sock.settimeout(20)
    while True:
        data = sock.recv(65536)
        now = time.monotonic() - started
        if not data:
            closed = now
            return b"".join(chunks), first, closed
        if not chunks:
            first = now
        chunks.append(data)


@pytest.mark.timeout(60)
def test_a_paused_body_is_cut_off_at_the_timeout(timed_server: ServerProcess) -> None:
    """Answered at S (not S plus uvicorn's keep-alive), and the connection closed with it: the
    rest of that body will never be read."""
    with socket.create_connection(("127.0.0.1", timed_server.port)) as sock:
        sock.sendall(_body_start(100))
        answer, first, closed = _answer_and_close(sock)
    assert answer.startswith(b"HTTP/1.1 500 ") and b"OperationTimedOut" in answer
    assert b"connection: close" in answer.lower()
    assert 0.8 < first < 3.0, first
    assert closed - first < 1.0, (first, closed)


@pytest.mark.timeout(60)
def test_a_huge_declared_body_is_refused_at_once(timed_server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", timed_server.port)) as sock:
        sock.sendall(_body_start(1_000_000_000_000))
        answer, first, closed = _answer_and_close(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    assert b"x-ms-error-code: RequestBodyTooLarge" in answer
    assert first < 0.5 and closed < 1.0, (first, closed)


@pytest.mark.timeout(60)
def test_silent_connections_are_closed(timed_server: ServerProcess) -> None:
    """Connections that never send a byte hold a socket each: all are closed after S."""
    sockets = [socket.create_connection(("127.0.0.1", timed_server.port)) for _ in range(200)]
    try:
        started = time.monotonic()
        for sock in sockets:
            sock.settimeout(10)
            assert sock.recv(1) == b""  # closed by the server, nothing said
        assert time.monotonic() - started < 4.0
    finally:
        for sock in sockets:
            sock.close()
    with socket.create_connection(("127.0.0.1", timed_server.port)) as sock:  # still serving
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(12) == b"HTTP/1.1 200"


@pytest.mark.timeout(60)
def test_idle_connections_are_closed_after_their_answer(timed_server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", timed_server.port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer, first, closed = _answer_and_close(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert 4.0 < closed - first < 7.0, (first, closed)  # the documented 5 s keep-alive
