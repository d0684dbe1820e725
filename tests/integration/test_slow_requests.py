"""Requests that arrive too slowly are cut off with an Azure error and free their connection."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess


@pytest.fixture(params=["1", "2"], ids=["1-worker", "2-workers"])
def impatient_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    args = ["--request-timeout", "1", "--workers", request.param]
    server = ServerProcess(tmp_path / "data", extra_args=args).start()
    yield server
    server.stop()


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
        sock.sendall(
            b"POST /devstoreaccount1/Tables HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
            b"Content-Type: application/json\r\n\r\n{"
        )
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 500 ")
    assert b"OperationTimedOut" in answer
