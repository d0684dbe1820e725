"""A copy source outside the server under test: a small HTTP server on a thread of the test
process, whose paths behave as the copy tests need.

``/data/N``: N bytes (the same N always gives the same bytes), ranges honoured;
``?pause=S&pieces=K`` sends them in K pieces with S seconds between, a trickle.
``/status/CODE``: that status with an Azure-style error (``x-ms-error-code`` and document).
``/silent``: accepts, then answers nothing for a minute.
``/redirect?to=URL``: 302 to URL.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def content(size: int) -> bytes:
    """The bytes ``/data/{size}`` serves."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{size}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests: list[dict[str, str]]

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        self.server.seen.append({name.lower(): value for name, value in self.headers.items()})  # type: ignore[attr-defined]
        if parts.path.startswith("/data/"):
            self._data(int(parts.path.rsplit("/", 1)[1]), query)
        elif parts.path.startswith("/status/"):
            status = int(parts.path.rsplit("/", 1)[1])
            body = (
                b'<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationFailure</Code>'
                b"<Message>This request is not authorized to perform this operation.\nRequestId:x</Message>"
                b"</Error>"
            )
            self.send_response(status)
            self.send_header("x-ms-error-code", "AuthorizationFailure")
            self.send_header("content-type", "application/xml")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif parts.path == "/silent":
            time.sleep(60)
        elif parts.path == "/redirect":
            self.send_response(302)
            self.send_header("location", query["to"])
            self.send_header("content-length", "0")
            self.end_headers()
        else:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

    def _data(self, size: int, query: dict[str, str]) -> None:
        data = content(size)
        start, end = 0, size
        wanted = _RANGE.fullmatch(self.headers.get("range", ""))
        if wanted:
            start = int(wanted[1])
            end = min(size, int(wanted[2]) + 1) if wanted[2] else size
            self.send_response(206)
            self.send_header("content-range", f"bytes {start}-{end - 1}/{size}")
        else:
            self.send_response(200)
        self.send_header("content-length", str(end - start))
        self.send_header("content-type", "application/x-test")
        self.send_header("x-ms-meta-origin", "remote")
        self.end_headers()
        pieces = max(1, int(query.get("pieces", "1")))
        pause = float(query.get("pause", "0"))
        body = data[start:end]
        step = max(1, -(-len(body) // pieces))
        for offset in range(0, len(body), step):
            try:
                self.wfile.write(body[offset : offset + step])
                self.wfile.flush()
            except OSError:
                return  # the server under test hung up (an abort)
            if pause and offset + step < len(body):
                time.sleep(pause)


class RemoteSource:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self._server = server
        self.base = f"http://127.0.0.1:{server.server_address[1]}"

    @property
    def seen(self) -> list[dict[str, str]]:
        """The headers of every request it was sent, in order."""
        return self._server.seen  # type: ignore[attr-defined,no-any-return]

    def url(self, path: str) -> str:
        return self.base + path


@contextmanager
def remote_source() -> Iterator[RemoteSource]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RemoteSource(server)
    finally:
        server.shutdown()
        server.server_close()
