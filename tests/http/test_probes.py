"""``/-/health`` and ``/-/ready``: orchestrators' probes, unauthenticated, on every service's port."""

from __future__ import annotations

import asyncio
import http.client
import json
from typing import Any

import pytest

from tabulae.http.gateway import Gateway, Mounts
from tests.serverproc import ServerProcess


def _get(port: int, path: str, method: str = "GET") -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)  # no Authorization, no x-ms-* headers at all
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/-/health", "/-/ready"])
def test_probes_answer_on_every_port_without_credentials(server: ServerProcess, path: str) -> None:
    for port in (server.port, server.queue_port, server.blob_port):
        status, content_type, body = _get(port, path)
        assert (status, content_type, json.loads(body)) == (200, "application/json", {"status": "ok"})
        assert _get(port, path, "HEAD")[::2] == (200, b"")


def test_not_ready_until_the_stores_are_open() -> None:
    """Before start-up has opened the stores the process is alive but not ready (503)."""
    opened = asyncio.Event()

    async def start() -> Mounts:
        await opened.wait()

        async def metrics(as_json: bool) -> tuple[bytes, bytes]:
            return b"text/plain", b""

        async def close() -> None:
            return None

        return Mounts({}, metrics, close)

    gateway = Gateway(start)

    async def call(path: str) -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "GET",
            "path": path,
            "query_string": b"",
            "server": ("127.0.0.1", 1),
        }
        await gateway(scope, None, send)
        return int(sent[0]["status"])

    async def scenario() -> list[int]:
        before = [await call("/-/health"), await call("/-/ready")]
        starting = asyncio.create_task(gateway.startup())
        opened.set()
        await starting
        return [*before, await call("/-/health"), await call("/-/ready")]

    assert asyncio.run(scenario()) == [200, 503, 200, 200]
