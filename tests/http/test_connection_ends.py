"""How connections end: an answer given before the request's body has all arrived still reaches a
client that writes its whole body first, and one client address holds only so many connections.

The clients here are raw sockets doing what real clients do: the Node SDK (and most HTTP
libraries, for a body their buffers take) writes the whole body before it reads, so a server that
answers 413 and closes at once makes the kernel reset the connection, and the client reports
``ECONNRESET`` rather than the answer. The bodies are several MiB beyond the limit, more than the
kernel's socket buffers hold, so the client's writes only finish if the server reads them.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.blobhttp import BlobHttp
from tests.serverproc import ServerProcess
from tests.system.test_reliability_support import read_response, signed_request

LIMIT = 4 * 1024 * 1024  # the Table service's largest body (a $batch)
OVERSIZED = LIMIT + 8 * 1024 * 1024
CAP = 4


@pytest.fixture
def capped_server(tmp_path: Path) -> Iterator[ServerProcess]:
    args = ["--workers", "1", "--max-connections-per-client", str(CAP)]
    server = ServerProcess(tmp_path / "data", extra_args=args).start()
    yield server
    server.stop()


def _write_all_then_read(port: int, head: bytes, body: bytes) -> bytes:
    """Send the head and the whole body (failing on a reset or a broken pipe, as the Node SDK
    would), then read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        sock.sendall(body)
        return _read_to_end(sock)


def _read_to_end(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.timeout(120)
def test_an_oversized_table_body_written_whole_gets_its_413(capped_server: ServerProcess) -> None:
    body = json.dumps({"TableName": "big", "pad": "x" * OVERSIZED}).encode()
    head, body = signed_request(capped_server.port, "POST", "Tables", body, "application/json")
    answer = _write_all_then_read(capped_server.port, head, body)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert b"x-ms-error-code: RequestBodyTooLarge" in answer
    assert b'"code":"RequestBodyTooLarge"' in answer
    assert b"connection: close" in answer.lower()


@pytest.mark.timeout(120)
def test_an_oversized_blob_body_written_whole_gets_its_413(capped_server: ServerProcess) -> None:
    """Append Block before 2022-11-02 takes 4 MiB: Azure's answer names the limit."""
    blobs = BlobHttp(capped_server.blob_port)
    assert blobs.request("PUT", "/big?restype=container").status == 201
    head = blobs.head_bytes(
        "PUT",
        "/big/log?comp=appendblock",
        {"x-ms-version": "2021-12-02", "Content-Length": str(OVERSIZED)},
    )
    answer = _write_all_then_read(capped_server.blob_port, head, bytes(OVERSIZED))
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert b"<Code>RequestBodyTooLarge</Code>" in answer
    assert b"<MaxLimit>4194304</MaxLimit>" in answer


@pytest.mark.timeout(120)
def test_any_answer_before_the_body_is_read_reaches_the_client(capped_server: ServerProcess) -> None:
    """Not only 413: an upload to a container that does not exist is refused from its headers."""
    blobs = BlobHttp(capped_server.blob_port)
    size = 8 * 1024 * 1024
    head = blobs.head_bytes(
        "PUT", "/nowhere/blob", {"x-ms-blob-type": "BlockBlob", "Content-Length": str(size)}
    )
    answer = _write_all_then_read(capped_server.blob_port, head, bytes(size))
    assert answer.startswith(b"HTTP/1.1 404 "), answer[:300]
    assert b"<Code>ContainerNotFound</Code>" in answer


@pytest.mark.timeout(60)
def test_expect_100_continue_with_an_oversized_length_gets_413_without_the_body(
    capped_server: ServerProcess,
) -> None:
    head, _ = signed_request(
        capped_server.port, "POST", "Tables", b"", "application/json", [("Expect", "100-continue")]
    )
    head = head.replace(b"Content-Length: 0", b"Content-Length: %d" % OVERSIZED)
    with socket.create_connection(("127.0.0.1", capped_server.port), timeout=30) as sock:
        sock.sendall(head)
        started = time.monotonic()
        answer = _read_to_end(sock)  # the server ends the connection: no body is awaited
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]  # and no "100 Continue" before it
    assert b'"code":"RequestBodyTooLarge"' in answer
    assert time.monotonic() - started < 3.0


def _get_metrics(sock: socket.socket) -> int:
    """The status of a ``GET /metrics`` on a kept-alive connection (read whole, so the next
    request on it starts clean)."""
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    sock.settimeout(10)
    return read_response(sock).status


def _connect_from(source: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


@pytest.mark.timeout(60)
def test_connections_beyond_the_cap_are_refused_with_server_busy(capped_server: ServerProcess) -> None:
    port = capped_server.port
    held = [_connect_from("127.0.0.1", port) for _ in range(CAP)]
    try:
        for sock in held:
            assert _get_metrics(sock) == 200
        with _connect_from("127.0.0.1", port) as extra:
            extra.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = _read_to_end(extra)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"x-ms-error-code: ServerBusy" in answer
        assert b"<Code>ServerBusy</Code>" in answer
        assert b"connection: close" in answer
        for sock in held:  # the connections within the cap are served as before
            assert _get_metrics(sock) == 200
        with _connect_from("127.0.0.2", port) as other:  # another address has a cap of its own
            assert _get_metrics(other) == 200
        held.pop().close()  # one closes: a new connection from the first address is served
        deadline = time.monotonic() + 10
        while True:
            with _connect_from("127.0.0.1", port) as again, contextlib.suppress(OSError):
                if _get_metrics(again) == 200:
                    break
            assert time.monotonic() < deadline, "a closed connection was never uncounted"
            time.sleep(0.1)
    finally:
        for sock in held:
            sock.close()
