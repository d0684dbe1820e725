"""Requests that arrive too slowly are cut off with an Azure error and free their connection."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import backend_names, database_url
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_database
from tests.rawhttp import RawClient
from tests.serverproc import ServerProcess
from tests.system.test_reliability_support import signed_request


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
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
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
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(12) == b"HTTP/1.1 200"


@pytest.mark.timeout(60)
def test_idle_connections_are_closed_after_their_answer(timed_server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", timed_server.port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer, first, closed = _answer_and_close(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert 4.0 < closed - first < 7.0, (first, closed)  # the documented 5 s keep-alive


# ------------------------------------------------------------------------------------------
# The pace of a body: after its first --request-timeout seconds, Azure's 10 minutes per MiB
# ------------------------------------------------------------------------------------------

MIN_RATE = 1024 * 1024 / 600  # bytes/s, as the server enforces it
GRACE = 2.0  # --request-timeout of the paced server: longer than any pause of the clients below


@pytest.fixture
def paced_server(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", extra_args=["--request-timeout", str(GRACE), "--workers", "1"])
    server.start()
    yield server
    server.stop()


def _answered(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


@pytest.mark.timeout(90)
def test_tricklers_are_cut_off_after_the_grace_period(paced_server: ServerProcess) -> None:
    """Twenty clients each send a byte a second: never a pause the pause rule would cut, far
    below the minimum rate. All are answered 500 OperationTimedOut (the Table port's JSON
    error) a little after the grace period, not when their 100,000-byte bodies would end."""
    sockets = [socket.create_connection(("127.0.0.1", paced_server.port)) for _ in range(20)]
    answers: dict[int, tuple[bytes, float]] = {}
    started = time.monotonic()
    try:
        for sock in sockets:
            sock.sendall(_body_start(100_000))
        while len(answers) < len(sockets) and time.monotonic() - started < 30:
            for index, sock in enumerate(sockets):
                if index in answers:
                    continue
                if _answered(sock):
                    answers[index] = (_read_all(sock), time.monotonic() - started)
                else:
                    with contextlib.suppress(OSError):
                        sock.sendall(b" ")
            time.sleep(1.0)
    finally:
        for sock in sockets:
            sock.close()
    assert len(answers) == len(sockets), f"{len(sockets) - len(answers)} tricklers were never cut off"
    for answer, when in answers.values():
        assert answer.startswith(b"HTTP/1.1 500 "), answer
        assert b"x-ms-error-code: OperationTimedOut" in answer
        assert b'"code":"OperationTimedOut"' in answer
        assert b"connection: close" in answer.lower()
        assert GRACE - 0.5 < when < GRACE + 10, when


def _paced_insert(port: int, table: str, rate: float, size: int) -> tuple[bytes, float]:
    """Insert an entity whose JSON body of about ``size`` bytes is sent at ``rate`` bytes/s,
    steadily (each tenth of a second brings the bytes due by then, so a late wake-up catches up);
    the answer, and how long the exchange took."""
    entity = {"PartitionKey": "p", "RowKey": f"r{rate:.0f}", "pad": "x" * size}
    head, body = signed_request(port, "POST", table, json.dumps(entity).encode(), "application/json")
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        started = time.monotonic()
        sent = 0
        while sent < len(body) and not _answered(sock):
            due = min(len(body), int((time.monotonic() - started) * rate) + 1)
            if due > sent:
                sock.sendall(body[sent:due])
                sent = due
            time.sleep(0.1)
        return _read_all(sock), time.monotonic() - started


@pytest.mark.timeout(90)
def test_a_steady_client_above_the_minimum_rate_is_served(paced_server: ServerProcess) -> None:
    """A body sent at 1.5 times the minimum rate for about three times the grace period is
    served; the same body at half the rate is cut off (the rule, not the pause rule, decides)."""
    raw = RawClient(paced_server.port)
    assert raw.create_table("paced").status == 201
    size = int(3 * GRACE * 1.5 * MIN_RATE)
    answer, took = _paced_insert(paced_server.port, "paced", 1.5 * MIN_RATE, size)
    assert answer.startswith(b"HTTP/1.1 201 "), answer[:300]
    assert took > 2 * GRACE, took  # it did run well past the grace period
    answer, took = _paced_insert(paced_server.port, "paced", 0.5 * MIN_RATE, size)
    assert answer.startswith(b"HTTP/1.1 500 ") and b"OperationTimedOut" in answer, answer[:300]
    assert took < 3 * GRACE + 5, took  # where the budget of half the rate ends: 2 * GRACE


@pytest.mark.timeout(90)
def test_a_trickled_blob_upload_is_cut_off(paced_server: ServerProcess) -> None:
    """Blob content is streamed to the store as it comes, under the same rule (the Blob port's
    XML error)."""
    blobs = BlobHttp(paced_server.blob_port)
    assert blobs.request("PUT", "/slow?restype=container").status == 201
    path = "/slow/b"
    head = blobs.head_bytes("PUT", path, {"x-ms-blob-type": "BlockBlob", "Content-Length": "100000"})
    with socket.create_connection(("127.0.0.1", paced_server.blob_port)) as sock:
        sock.sendall(head)
        started = time.monotonic()
        while not _answered(sock) and time.monotonic() - started < 30:
            sock.sendall(b"x")
            time.sleep(1.0)
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 500 "), answer
    assert b"<Code>OperationTimedOut</Code>" in answer
    assert time.monotonic() - started < GRACE + 10
    assert blobs.request("GET", path).status == 404  # nothing was written
