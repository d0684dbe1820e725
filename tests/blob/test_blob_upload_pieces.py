"""An upload's body reaches the store in the pieces the network delivered, never joined on the
way (``http.protocol._BodyParts``; SQLite writes a piece of many of them with one ``writev``, or
joins it first past the system's vector limit): whatever the pieces, the blob is byte for byte
the body, and its Content-MD5 is the body's."""

from __future__ import annotations

import base64
import hashlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module", params=backend_names())
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    extra = ["--workers", "1", *fresh_store(request.param)]
    process = ServerProcess(tmp_path_factory.mktemp("data"), extra_args=extra, backend=request.param).start()
    yield process
    process.stop()


@pytest.mark.parametrize("piece", [613, 64 * 1024 + 3])
def test_body_sent_in_many_small_writes_is_stored_exactly(
    server: ServerProcess, piece: int, tmp_path: Path
) -> None:
    service = BlobServiceClient.from_connection_string(server.connection_string)
    container = service.get_container_client(f"pieces{piece}")
    container.create_container()
    body = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(40_000))  # 1.25 MiB
    head = BlobHttp(server.blob_port).head_bytes(
        "PUT", f"/pieces{piece}/slow", {"x-ms-blob-type": "BlockBlob", "Content-Length": str(len(body))}
    )
    with socket.create_connection(("127.0.0.1", server.blob_port), timeout=120) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(head)
        for start in range(0, len(body), piece):  # separate segments, most of them read apart
            sock.sendall(body[start : start + piece])
            if start // piece % 64 == 0:
                time.sleep(0.002)
        answer = b""
        while b"\r\n\r\n" not in answer:
            received = sock.recv(65536)
            if not received:
                break
            answer += received
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    blob = container.get_blob_client("slow")
    assert blob.download_blob().readall() == body
    stored_md5 = blob.get_blob_properties().content_settings.content_md5
    assert bytes(stored_md5) == hashlib.md5(body).digest()
    assert base64.b64encode(hashlib.md5(body).digest()).decode() in answer.decode("latin-1")
