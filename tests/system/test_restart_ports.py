"""A multi-worker server started while a killed server's workers still hold their listening
sockets (``SO_REUSEPORT``) must not join them: connections the kernel hashed to a dying socket
would be reset. It claims its ports, waits until the leftovers are gone, then listens on all."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from azure.storage.blob import BlobServiceClient

from tests.serverproc import ServerProcess


def claimed(port: int) -> bool:
    """Whether a Tabulae server holds the abstract socket that claims ``port``."""
    with open("/proc/net/unix") as table:
        return any(line.rstrip().endswith(f"@tabulae-port-{port}") for line in table)


def refuses(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_a_server_listens_only_once_a_leftover_listener_is_gone(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", extra_args=["--workers", "2"])
    leftover = socket.socket()
    leftover.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    leftover.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    leftover.bind(("127.0.0.1", server.blob_port))
    leftover.listen()
    started: list[BaseException | None] = []

    def start() -> None:
        try:
            server.start(timeout=60)
            started.append(None)
        except BaseException as exc:  # handed to the test's thread below
            started.append(exc)

    starter = threading.Thread(target=start)
    starter.start()
    try:
        deadline = time.monotonic() + 60
        while not claimed(server.blob_port):
            assert time.monotonic() < deadline, "the server never claimed its ports"
            time.sleep(0.05)
        for _ in range(3):  # claimed, waiting: none of its ports listens yet
            assert refuses(server.port) and refuses(server.queue_port)
            time.sleep(0.2)
    finally:
        leftover.close()
        starter.join()
    try:
        assert started == [None]
        service = BlobServiceClient.from_connection_string(server.connection_string)
        for index in range(20):  # every connection lands on a socket the server serves
            fresh = BlobServiceClient.from_connection_string(server.connection_string)
            fresh.create_container(f"box{index}")
        assert len(list(service.list_containers())) == 20
    finally:
        server.stop()
